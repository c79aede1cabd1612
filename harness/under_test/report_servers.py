"""The report's figures of servers under test beyond one load: capacity under a latency
budget (a table and the latency-versus-rate curve with the budget line), the concurrency
check's trials (fails out of N with the interval), and cold starts per launch. Each returns
None when no case or check has what it shows."""

from __future__ import annotations

import statistics
from pathlib import Path

from ..judge.busy import busy
from ..records import RunRecord
from ..report import fmt
from ..report.fmt import Table
from ..report.plots import pyplot, save_png
from ..report.tables import Row


def _load_share(load) -> str:
    return "-" if load is None else f"{load.other_share:.0%}"


def capacity_table(rows: list[Row]) -> Table | None:
    """Per slo case: what the search found, items/s at the budget over the repeats, the
    steps it took and what each needed."""
    chosen = [r for r in rows if r.case.slo is not None]
    if not chosen:
        return None
    many = len({r.run for r in chosen}) > 1
    out = []
    for r in chosen:
        s = r.case.slo
        ips = [x.items_per_s for x in s.repeats if x.items_per_s]
        spread = f" ({min(ips):.3g}-{max(ips):.3g})" if len(ips) > 1 else ""
        out.append([r.case.case_id] + ([r.run] if many else []) + [
            f"p{s.percentile:g} <= {s.budget_ms:g} ms", s.status, fmt.num(s.rate),
            fmt.num(s.bound), (fmt.num(s.items_per_s) + spread) if s.items_per_s else "-",
            f"{s.met_repeats}/{len(s.repeats)}" if s.repeats else "-", str(len(s.steps)),
            str(s.requests_per_step), f"{s.precision:.0%}", _load_share(r.case.load)])
    header = (["Case"] + (["Run"] if many else []) + ["Budget", "Search", "Rate found (req/s)",
              "Missed at", "items/s at the budget", "Repeats met", "Steps",
              "Requests/step", "Precision", "Other load"])
    return Table(header=header, rows=out, align=["l"] * (3 + many) + ["r"] * 8,
                 title="Capacity under a latency budget",
                 note="The highest open-loop Poisson rate whose percentile (answered "
                      "requests, nearest rank) met the budget, below the lowest that "
                      "missed it; items/s at the budget: the median of the repeats at that "
                      "rate (min-max). Requests per step: the fewest whose distribution-free "
                      "95% interval bounds the percentile (368 for p99). Other load: the "
                      "share of the CPU other processes held meanwhile.")


def capacity_chart(rows: list[Row], path: Path, subject: str = "") -> Path | None:
    """Latency (the budget's percentile, and p50) against the offered rate of every step
    of every slo case, with each budget as a horizontal line; missed steps hollow; a case
    measured on a busy machine named in the legend."""
    chosen = [r for r in rows if r.case.slo is not None and r.case.slo.steps]
    if not chosen:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5 + 0.2 * len(chosen)))
    many = len({r.run for r in chosen}) > 1
    names = distinct_parts([r.case.case_id for r in chosen])
    for k, (r, name) in enumerate(zip(chosen, names, strict=True)):
        s = r.case.slo
        steps = sorted((x for x in s.steps if x.percentile_ms), key=lambda x: x.rate)
        color = f"C{k % 10}"
        ax.plot([x.rate for x in steps], [x.percentile_ms for x in steps], "-", color=color,
                lw=1, label=f"{name}: p{s.percentile:g}" + (f" ({r.run})" if many else "")
                + (" (busy machine)" if busy(r.case.load) else ""))
        ax.plot([x.rate for x in steps], [x.p50_ms for x in steps], ":", color=color, lw=1)
        for x in steps:
            ax.plot([x.rate], [x.percentile_ms], "o", color=color,
                    mfc=color if x.meets else "none", ms=5)
        for x in (x for x in s.repeats if x.percentile_ms):
            ax.plot([x.rate], [x.percentile_ms], "x" if x.meets else "+", color=color, ms=7)
        ax.axhline(s.budget_ms, color=color, ls="--", lw=0.8)
        if s.rate is not None and s.status == "found":  # `not held`: no capacity claimed
            ax.axvline(s.rate, color=color, ls="-.", lw=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(y=0.08)
    ax.set_xlabel("offered rate (requests/s, Poisson; log scale)")
    ax.set_ylabel("latency (ms, log scale)")
    ax.set_title((f"{subject}: l" if subject else "L") + "atency against rate: percentile "
                 "(solid), p50 (dotted), budget (dashed), rate found (dash-dot), its "
                 "repeats (x met, + missed); hollow: missed",
                 fontsize=8)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    return save_png(fig, path)


def distinct_parts(ids: list[str]) -> list[str]:
    """Each case id without the `/` parts every one of them shares (a legend's names);
    the whole id where nothing is left."""
    parts = [i.split("/") for i in ids]
    shared = set.intersection(*(set(p) for p in parts)) if parts else set()
    return ["/".join(x for x in p if x not in shared) or i for p, i in zip(parts, ids,
                                                                          strict=True)]


def trials_table(records: list[RunRecord]) -> Table | None:
    """Per concurrency check with trials: fails out of N, the rate and its interval, the
    bound, and when in the servers' lives scores moved."""
    out = []
    for rec in records:
        for c in (rec.parity.checks if rec.parity else []):
            if c.check != "concurrency" or c.fails is None:
                continue
            n = len(c.trials) or 1
            moved = [t for t in c.trials if t.status == "failed"]
            when = sorted({w for t in moved for w in t.when}) or ["-"]
            out.append([c.case_id, f"{c.fails} of {n}", f"{c.fail_rate:.0%}",
                        f"{c.fail_low:.0%} to {c.fail_high:.0%}", f"{c.max_fail_rate:.0%}",
                        ", ".join(f"{t.moved_items} in {t.moved_requests}" for t in moved)
                        or "-", "; ".join(when), c.status])
    if not out:
        return None
    return Table(header=["Server", "Failed trials", "Fail rate", "95% interval",
                         "max_fail_rate", "Items in requests moved (per failing trial)",
                         "When they moved", "Check"], rows=out,
                 align=["l", "r", "r", "r", "r", "l", "l", "l"],
                 title="Concurrency invariance over trials",
                 note="Each trial a fresh launch of a launched server: the same requests "
                      "alone, under load twice, alone again (docs/parity.md). Interval: "
                      "Clopper-Pearson (exact binomial); the check is judged on the observed "
                      "rate.")


def cold_start_table(rows: list[Row]) -> Table | None:
    """Per case with cold starts: launches, launch to ready, first request and warm p50."""
    chosen = [r for r in rows if r.case.cold_start is not None]
    if not chosen:
        return None
    out = []
    for r in chosen:
        c = r.case.cold_start
        up = [x for x in c.launches if x.error is None]

        def span(name: str, scale: float = 1.0, launches=up) -> str:
            vs = [scale * getattr(x, name) for x in launches if getattr(x, name) is not None]
            return (f"{statistics.median(vs):.3g} ({min(vs):.3g}-{max(vs):.3g})" if vs
                    else "-")
        out.append([r.case.case_id, f"{len(up)} of {len(c.launches)}", span("ready_s"),
                    span("first_ms"), span("warm_p50_ms"), span("first_over_warm"),
                    _load_share(c.load)])
    return Table(header=["Case", "Launches up", "Launch to ready (s)", "First request (ms)",
                         "Warm p50 (ms)", "First / warm", "Other load"], rows=out,
                 align=["l", "r", "r", "r", "r", "r", "r"], title="Cold starts",
                 note="Each launch fresh: start to the ready probe's 200, then request 0 of "
                      "the workload, then the warm requests one at a time; median (min-max) "
                      "over the launches. compare and ab need at least 3 launches a side for "
                      "a verdict.")

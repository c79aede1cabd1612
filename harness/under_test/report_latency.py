"""The report's servers section: the servers mibench launched (what they are: command,
arguments, version, package, source commit, start-up time, log), one table row per
`engine: http` case (its load, what came back, latency percentiles) and one plot of every
such case's latency CDF.

Each takes the report's rows (`tables.rows_of`) and returns None when no case has what it
shows, so the section appears only for artifacts that hold http cases.
"""

from __future__ import annotations

from pathlib import Path

from ..judge.busy import busy
from ..report import fmt
from ..report.fmt import Table
from ..report.marks import axis_label, log_scale
from ..report.plots import pyplot, save_png
from ..report.tables import Row


def http_rows(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.case.http is not None]


def _shape(row: Row) -> str:
    """How the row's requests were sent: closed loop, open loop or a capacity search."""
    p = row.case.params
    if row.case.slo is not None:
        return f"slo: repeats at {fmt.num(row.case.slo.rate)}/s" if row.case.slo.rate \
            else f"slo: {row.case.slo.status}"
    if row.case.http.load == "closed":
        n = p.get("clients")
        return f"{n} client{'s' * (n != 1)}"
    return f"{p.get('rate'):g}/s Poisson"


def _errors(errors: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or "-"


def latency_table(rows: list[Row]) -> Table | None:
    """Per http case: load, requests sent and answered, errors by status, achieved rates,
    latency percentiles (ms, over the answered requests), status."""
    chosen = http_rows(rows)
    if not chosen:
        return None
    many = len({r.run for r in chosen}) > 1
    header = (["Case"] + (["Run"] if many else []) + ["Load", "Sent", "OK", "Errors",
              "req/s", "items/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "Status"])
    out = []
    for r in chosen:
        m, lat = r.case.http, r.case.http.latency
        out.append([r.case.case_id] + ([r.run] if many else []) + [
            _shape(r), str(m.sent), str(m.ok), _errors(m.errors), fmt.num(m.requests_per_s),
            fmt.num(m.items_per_s)] + [fmt.num(getattr(lat, k) if lat else None)
                                       for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")]
            + [r.case.status])
    align = ["l"] * (2 + many) + ["r", "r", "l"] + ["r"] * 6 + ["l"]
    return Table(header=header, rows=out, align=align,
                 title="Server latency (http cases)",
                 note="Latency: sending a request to its whole answer, answered requests "
                      "only (nearest-rank percentiles); req/s and items/s: answered "
                      "requests over the load's duration.")


def servers_table(rows: list[Row]) -> Table | None:
    """One row per server mibench launched (the cases that shared it listed by count):
    its name and arguments, what it says its version is, its package's version in its
    interpreter, its source's commit, start-up time, its log; the exact commands below."""
    seen: dict[tuple, tuple[Row, int]] = {}
    for r in rows:
        s = r.case.server
        if s is not None:
            key = (r.run, tuple(s.command))
            seen[key] = (seen.get(key, (r, 0))[0], seen.get(key, (r, 0))[1] + 1)
    if not seen:
        return None
    out, commands = [], []
    for r, n in seen.values():
        s = r.case.server
        args = ", ".join(f"{k}={v}" for k, v in s.args.items()) or "-"
        source = s.source or {}
        commit = (source.get("commit") or "")[:12] + ("+" if source.get("dirty") else "")
        package = f"{s.package} {s.package_version or '?'}" if s.package else "-"
        out.append([s.name or "-", args, str(s.reported.get("version") or "-"), package,
                    commit or "-", f"{s.startup_s:.1f}", str(n), f"`{s.log}`"])
        commands.append(" ".join(s.command))
    note = "Started on a free loopback port, stopped after its cases and parity checks. " \
           "Commands: " + "; ".join(f"`{c}`" for c in dict.fromkeys(commands))
    return Table(header=["Server", "Arguments", "Reported version", "Package", "Source commit",
                         "Start-up (s)", "Cases", "Log"], rows=out,
                 align=["l", "l", "l", "l", "l", "r", "r", "l"],
                 title="Servers mibench launched", note=note)


def cdf_chart(rows: list[Row], path: Path, subject: str = "") -> Path | None:
    """Empirical latency CDF of every http case's answered requests (a log x axis past
    marks.LOG_SPAN); a case measured on a busy machine dashed and named."""
    lines = []
    for r in http_rows(rows):
        ms = sorted(1000.0 * q.latency_s for q in r.case.http.requests if q.status == 200)
        if ms:
            lines.append((r.case.case_id if len({x.run for x in rows}) == 1
                          else f"{r.run} {r.case.case_id}", ms, busy(r.case.load)))
    if not lines:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, ms, b in lines:
        ys = [(k + 1) / len(ms) for k in range(len(ms))]
        ax.step([ms[0], *ms], [0.0, *ys], where="post", ls="--" if b else "-",
                label=f"{name} (n={len(ms)}{', busy machine' if b else ''})")
    log = log_scale([v for _, ms, _ in lines for v in (ms[0], ms[-1])])
    if log:
        ax.set_xscale("log")
    for q in (0.5, 0.9, 0.99):
        ax.axhline(q, color="grey", lw=0.6, ls=":")
    ax.set_ylim(0, 1.01)
    ax.set_xlabel(axis_label("latency (ms)", log))
    ax.set_ylabel("fraction of requests")
    ax.set_title((f"{subject}: s" if subject else "S") + "erver latency CDF (http cases)")
    ax.legend(fontsize=7, loc="lower right")
    return save_png(fig, path)

"""Exporters of `mibench compare` and `mibench history`: Markdown (Jinja2 templates) and JSON.

Each takes the computed record (harness.compare.Comparison, harness.history.History) and only
formats it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mibench.harness.report import fmt, plots, render
from mibench.harness.report.fmt import Table
from mibench.harness.stats.compare import MIN_RUNS, Comparison
from mibench.harness.stats.history import History, Series

COMPARE_SCHEMA = "mibench.compare/1"
HISTORY_SCHEMA = "mibench.history/1"


def _render(name: str, **context) -> str:
    return render(context, name)


def compare_table(comp: Comparison) -> Table:
    """Every case side by side: statuses, items/s (from the raw runs), the change with its
    interval, the evidence, the scores and the verdict with its reason."""
    body = []
    for c in comp.cases:
        verdict = f"**{c.verdict}**" if c.regression or c.verdict == "untested" else c.verdict
        scores = "-" if c.scores is None else (
            f"**{fmt.sci(c.scores.max_log_diff)} > {c.scores.tolerance:g}**" if c.scores.moved
            else "not compared" if c.scores.max_log_diff is None
            else f"{fmt.sci(c.scores.max_log_diff)} <= {c.scores.tolerance:g}")
        change = "-" if c.change is None else (
            fmt.pct(c.change) + (f" [{fmt.pct(c.low)}, {fmt.pct(c.high)}]"
                                 if c.low is not None else ""))
        body.append([c.case_id, c.base_status or "-", c.new_status or "-",
                     fmt.num(c.base_items_per_s), fmt.num(c.new_items_per_s), change,
                     fmt.significance(c.test), scores, verdict, c.reason])
    return Table(["Case", "Base status", "New status", f"{comp.base} items/s",
                  f"{comp.new} items/s", "Items/s change [interval]", "Evidence",
                  "Scores (max abs ln diff)", "Verdict", "Why"], body,
                 ["l"] * 3 + ["r"] * 3 + ["l"] * 4)


def parity_changes(comp: Comparison) -> tuple[Table | None, Table | None]:
    """(checks that do not pass or newly changed, passing checks to fold away)."""
    if not comp.parity:
        return None, None
    rows: dict[bool, list] = {True: [], False: []}
    for p in comp.parity:
        passing = p.new_status == "passed" and not p.regression
        rows[passing].append([p.key, p.base_status or "-", p.new_status,
                              "-" if p.new_max_log_diff is None else f"{p.new_max_log_diff:.3g}",
                              fmt.sci(p.new_max_abs_diff),
                              fmt.sci(p.tolerance), "**regression**" if p.regression else "ok"])
    header = ["Check", "Base", "New", "Max abs ln diff", "Max abs diff", "Tolerance",
              "Verdict"]
    align = ["l"] * 3 + ["r"] * 3 + ["l"]
    return tuple(Table(header, rows[k], align) if rows[k] else None for k in (False, True))


def compare_markdown(comp: Comparison, note: str | None = None) -> str:
    from mibench.harness.report import method_lines

    failing, passing = parity_changes(comp)
    return _render("compare.md.j2", comp=comp, verdict=fmt.verdict_line(comp),
                   score_notes=fmt.score_notes(comp),
                   cases=compare_table(comp), parity=failing, parity_passed=passing,
                   methods=method_lines(comp), threshold=f"{comp.threshold:.0%}", note=note,
                   min_runs=MIN_RUNS)


def compare_json(comp: Comparison, note: str | None = None) -> str:
    data = {"schema": COMPARE_SCHEMA, "outcome": comp.outcome, "exit_code": comp.exit_code,
            "regression": comp.regression, "verdict": fmt.verdict_line(comp),
            "methods": comp.methods, "note": note, **dataclasses.asdict(comp)}
    return json.dumps(data, indent=1, default=str) + "\n"


def _peak_current(s: Series) -> tuple[str, str, str]:
    peak, cur = s.peak, s.current
    if peak is None:
        return "-", cur.status, "-"
    now = fmt.num(cur.items_per_s) if cur.items_per_s is not None else f"**{cur.status}**"
    delta = fmt.pct(cur.items_per_s / peak.items_per_s - 1) if cur.items_per_s else "-"
    return f"{fmt.num(peak.items_per_s)} ({peak.label})", f"{now} ({cur.label})", delta


def history_tables(hist: History) -> tuple[Table, list[Table]]:
    """The summary (peak vs current, change points) and one series table per case."""
    rows, series = [], []
    for s in hist.series:
        cps = "; ".join(f"at {s.points[c.index].label}: {fmt.num(c.before)} -> "
                        f"{fmt.num(c.after)} ({fmt.pct(c.change)}, p={c.p_value:.3g})"
                        for c in s.change_points) or "none"
        name = s.name if len(hist.configs) > 1 else s.case_id
        rows.append([name, *_peak_current(s), cps])
        body = [[p.label, p.time, p.run_id,
                 fmt.num(p.items_per_s) if p.items_per_s is not None else f"**{p.status}**",
                 "change point" if any(c.index == i for c in s.change_points) else ""]
                for i, p in enumerate(s.points)]
        series.append(Table(["Commit", "Time", "Run", "Items/s (median)", ""], body,
                            ["l", "l", "l", "r", "l"], title=name))
    summary = Table(["Case", "Peak items/s", "Current items/s", "Current vs peak",
                     "Change points"], rows, ["l", "r", "r", "r", "l"])
    return summary, series


def history_plots(hist: History, out: Path) -> dict[str, str]:
    """One trend PNG per case beside `out`: series title -> file name."""
    made = {}
    stem = out.with_suffix("")
    for k, s in enumerate(hist.series):
        name = s.name if len(hist.configs) > 1 else s.case_id
        path = plots.trend_chart(name, [p.label for p in s.points],
                                 [p.items_per_s for p in s.points],
                                 [c.index for c in s.change_points],
                                 Path(f"{stem}-trend-{k + 1}.png"))
        if path is not None:
            made[name] = path.name
    return made


def history_markdown(hist: History, trend_plots: dict[str, str] | None = None) -> str:
    summary, series = history_tables(hist)
    return _render("history.md.j2", hist=hist, summary=summary, series=series,
                   plots=trend_plots or {})


def history_json(hist: History) -> str:
    data = {"schema": HISTORY_SCHEMA, "method": hist.method,
            "params": dataclasses.asdict(hist.params), "artifacts": hist.artifacts,
            "series": [{**dataclasses.asdict(s),
                        "peak": dataclasses.asdict(s.peak) if s.peak else None,
                        "current": dataclasses.asdict(s.current)} for s in hist.series]}
    return json.dumps(data, indent=1) + "\n"

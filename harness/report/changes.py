"""The outputs of `mibench compare` and `mibench history`: Markdown (Jinja2 templates) and
JSON.

Each takes the computed record (`Comparison`, harness/judge/comparison.py; `History`,
harness/judge/history.py) and only formats it.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

from ..judge.compare import MIN_RUNS, Comparison
from ..judge.compile_counts import count
from ..judge.history import History, Series
from ..records import PASSING
from ..records.outputs import COMPARE_SCHEMA, HISTORY_SCHEMA
from . import fmt, render
from .fmt import Table

CONVENTION_JSON = ("latency_change, latency_low, latency_high: time per item new / base - 1 "
                   "(+ = slower), the primary change; items_per_s_change, items_per_s_low, "
                   "items_per_s_high: items/s new / base - 1 (+ = faster); "
                   "base_other_load, new_other_load: other processes' share of the CPU while "
                   "each side was measured (null: not recorded); memory.ratio, "
                   "memory.change: own peak bytes new / base (- 1), + = larger; "
                   "timed_compiles: null = not counted")


MEMORY_NOTE = ("Peak memory: the case's own peak, base -> new, change new / base - 1 (+ = "
               "larger) and the ratio; compared only when both are own peaks of one kind "
               "(device, or rss-rise on a CPU). Timed compiles: XLA compilations during the "
               "new side's timed runs (any fails the gate; not counted: the artifact has no "
               "count).")


LOAD_NOTE = ("Other load: the share of the machine's CPU that processes outside mibench "
             "held while each side was measured (`-`: not recorded); past {level:.0%} (bold) "
             "a side's timing is no evidence and the case is inconclusive.")


def _render(name: str, **context) -> str:
    return render(context, name)


def _status(c) -> str:
    both = c.base_status == c.new_status
    return (c.new_status or "-") if both else f"{c.base_status or '-'} -> {c.new_status or '-'}"


def compare_table(comp: Comparison) -> Table:
    """Every case side by side: status, ms/item of both sides and the change of time per
    item with its interval (one statistic, + = slower), the evidence, the scores and the
    verdict with its reason."""
    body = []
    for c in comp.cases:
        verdict = f"**{c.verdict}**" if c.regression or c.verdict == "untested" else c.verdict
        scores = "-" if c.scores is None else (
            f"**{fmt.sci(c.scores.max_log_diff)} > {c.scores.tolerance:g}**" if c.scores.moved
            else "not compared" if c.scores.max_log_diff is None
            else f"{fmt.sci(c.scores.max_log_diff)} <= {c.scores.tolerance:g}")
        compiles = count(c.timed_compiles)
        body.append([c.case_id, _status(c), fmt.num(c.base_ms_per_item, 3),
                     fmt.num(c.new_ms_per_item, 3), fmt.interval(c).removeprefix("time "),
                     fmt.significance(c.test), fmt.load_pair(c, comp.busy_level), scores,
                     fmt.memory_change(c.memory),
                     f"**{compiles}**" if c.timed_compiles else compiles, verdict, c.reason])
    table = Table(["Case", "Status", f"{comp.base} ms/item", f"{comp.new} ms/item",
                   "Time change [interval]", "Evidence", "Other load (base, new)",
                   "Scores (max abs ln diff)", "Peak memory (own)", "Timed compiles",
                   "Verdict", "Why"], body,
                  ["l"] * 2 + ["r"] * 3 + ["l"] + ["r"] + ["l"] + ["r"] * 2 + ["l"] * 2,
                  note=f"{fmt.CONVENTION} {LOAD_NOTE.format(level=comp.busy_level)} "
                       f"{MEMORY_NOTE}")
    return table.lift_constant(["Status", "Evidence", "Other load (base, new)",
                                "Scores (max abs ln diff)", "Peak memory (own)",
                                "Timed compiles"])


def parity_changes(comp: Comparison) -> tuple[Table | None, Table | None]:
    """(checks that do not pass or newly changed, passing checks to fold away)."""
    if not comp.parity:
        return None, None
    rows: dict[bool, list] = {True: [], False: []}
    for p in comp.parity:
        passing = p.new_status in PASSING and not p.regression
        rows[passing].append([p.key, p.base_status or "-", p.new_status,
                              "-" if p.new_max_log_diff is None else f"{p.new_max_log_diff:.3g}",
                              fmt.sci(p.new_max_abs_diff),
                              fmt.sci(p.tolerance), "**regression**" if p.regression else "ok"])
    header = ["Check", "Base", "New", "Max abs ln diff", "Max abs diff", "Tolerance",
              "Verdict"]
    align = ["l"] * 3 + ["r"] * 3 + ["l"]
    return tuple(Table(header, rows[k], align) if rows[k] else None for k in (False, True))


def compare_markdown(comp: Comparison, note: str | None = None) -> str:
    from . import method_lines

    failing, passing = parity_changes(comp)
    return _render("compare.md.j2", comp=comp, verdict=fmt.verdict_line(comp),
                   score_notes=fmt.score_notes(comp),
                   cases=compare_table(comp), parity=failing, parity_passed=passing,
                   methods=method_lines(comp), threshold=f"{comp.threshold:.0%}", note=note,
                   memory_threshold=f"{comp.memory_threshold:.0%}",
                   busy_level=f"{comp.busy_level:.0%}",
                   min_runs=MIN_RUNS)


def compare_json(comp: Comparison, note: str | None = None) -> str:
    data = {"schema": COMPARE_SCHEMA, "outcome": comp.outcome, "exit_code": comp.exit_code,
            "regression": comp.regression, "verdict": fmt.verdict_line(comp),
            "convention": CONVENTION_JSON, "busy": comp.busy_line(),
            "methods": comp.methods, "note": note, **dataclasses.asdict(comp)}
    return json.dumps(data, indent=1, default=str) + "\n"


def point_labels(points) -> list[str]:
    """Each point's commit label, `#n` added where a commit has several artifacts."""
    labels = [p.label for p in points]
    artifacts = Counter(labels)  # labels.count per point was quadratic in the points
    seen: Counter = Counter()
    out = []
    for lab in labels:
        seen[lab] += 1
        out.append(f"{lab} #{seen[lab]}" if artifacts[lab] > 1 else lab)
    return out


def _peak_current(s: Series) -> tuple[str, str, str]:
    peak, cur = s.peak, s.current
    if peak is None:
        return "-", cur.status, "-"
    now = fmt.num(cur.items_per_s) if cur.items_per_s is not None else f"**{cur.status}**"
    slower = fmt.pct(peak.items_per_s / cur.items_per_s - 1) if cur.items_per_s else "-"
    return f"{fmt.num(peak.items_per_s)} ({peak.label})", f"{now} ({cur.label})", slower


def _memory_trend(s: Series) -> str:
    """`2.8 GiB (+20.0% vs 2.3 GiB at abc)`: the current own peak against the lowest of its
    kind; the current alone, or why it is not trended."""
    cur, low = s.current, s.lowest_memory
    if cur.peak_memory_bytes is None:
        return "-"
    if low is None:
        return f"{fmt.peak(cur.peak_memory_bytes, cur.peak_memory_source)} " \
               f"({cur.peak_memory_source}: not trended)"
    if low is cur:
        return f"{fmt.size(cur.peak_memory_bytes)} (the lowest)"
    return (f"{fmt.size(cur.peak_memory_bytes)} ({fmt.pct(s.memory_change)} vs "
            f"{fmt.size(low.peak_memory_bytes)} at {low.label})")


def step_text(step, labels: list[str] | None = None) -> str:
    """`at abc: suspected step, **regression**, time +213.7% [+98.0%, +395.1%]` (with
    `labels`: the summary's), else the same with the items/s and the reason."""
    interval = (f" [{step.latency_low:+.1%}, {step.latency_high:+.1%}]"
                if step.latency_low is not None else "")
    head = f"{step.kind}, **{step.verdict}**, time {fmt.pct(step.latency_change)}{interval}"
    if labels is not None:
        return f"at {labels[step.index]}: {head}"
    return f"{head}: {fmt.num(step.before)} -> {fmt.num(step.after)} items/s; {step.reason}"


def history_tables(hist: History) -> tuple[Table, list[Table]]:
    """The summary (peak vs current, memory, steps) and one series table per measurement."""
    rows, series = [], []
    for s in hist.series:
        labels = point_labels(s.points)
        steps = "; ".join(step_text(st, labels) for st in s.steps) or "none"
        name = s.name if len(hist.configs) > 1 else (
            s.case_id + (f" [{s.label}]" if s.label else ""))
        busy = sum(p.busy(hist.busy_level) for p in s.points)
        rows.append([name, *_peak_current(s), _memory_trend(s), steps,
                     str(busy) if busy else "-"])
        at = {st.index: st for st in s.steps}
        body = [[labels[i], p.time, p.run_id,
                 fmt.num(p.items_per_s) if p.items_per_s is not None else f"**{p.status}**",
                 fmt.share(p.other_load, hist.busy_level),
                 fmt.peak(p.peak_memory_bytes, p.peak_memory_source)
                 + (f" ({p.peak_memory_source})" if p.peak_memory_source else ""),
                 step_text(at[i]) if i in at else ""]
                for i, p in enumerate(s.points)]
        series.append(Table(["Commit", "Time", "Run", "Items/s (median)", "Other load",
                             "Peak memory", "Step before it"], body,
                            ["l", "l", "l", "r", "r", "r", "l"], title=name))
    summary = Table(["Case", "Peak items/s", "Current items/s", "Time, current vs peak",
                     "Peak memory, current vs lowest", "Steps", "Busy points"], rows,
                    ["l", "r", "r", "r", "r", "l", "r"],
                    note="Time changes: time per item, new / old - 1, + = slower (the "
                         "convention of every mibench table). Other load: the share of the "
                         "CPU that processes outside mibench held while the point was "
                         f"measured; past {hist.busy_level:.0%} (bold) the point is busy: "
                         "shown, never evidence (change points are found among the other "
                         "points; a step with a busy side is inconclusive). `missing`: the "
                         "case is not in that artifact (a gap, not a zero). Memory: the "
                         "case's own peak (device, or rss-rise on a CPU), new / lowest of "
                         "the same kind - 1, + = larger; a bound (device-bound) or an older "
                         "artifact's rss is not trended.")
    return summary, series


def history_markdown(hist: History, trend_plots: dict[str, str] | None = None) -> str:
    summary, series = history_tables(hist)
    return _render("history.md.j2", hist=hist, summary=summary, series=series,
                   plots=trend_plots or {})


def history_json(hist: History) -> str:
    def series(s: Series) -> dict:
        out = dataclasses.asdict(s)
        for step, raw in zip(s.steps, out["steps"], strict=True):
            raw["items_per_s_change"] = step.items_per_s_change
        return {**out, "name": s.name, "memory_change": s.memory_change,
                "peak": dataclasses.asdict(s.peak) if s.peak else None,
                "current": dataclasses.asdict(s.current)}

    data = {"schema": HISTORY_SCHEMA, "method": hist.method,
            "params": dataclasses.asdict(hist.params), "artifacts": hist.artifacts,
            "noise": hist.noise, "busy_level": hist.busy_level, "skipped": hist.skipped,
            "convention": "steps[].latency_change, latency_low, latency_high: time per item "
                          "after / before - 1 (+ = slower), the primary change; "
                          "items_per_s_change: items/s after / before - 1 (+ = faster); "
                          "points[].other_load: other processes' share of the CPU (null: not "
                          "recorded); points[].status missing: not in that artifact (a gap)",
            "series": [series(s) for s in hist.series]}
    return json.dumps(data, indent=1) + "\n"

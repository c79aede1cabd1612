"""`mibench report`: a Markdown report of one or more artifacts (Jinja2 template
`harness/report/templates/report.md.j2`), PNG plots beside it.

`build_context` gathers the tables (pure: records in, a dict out); `render` fills the
template; `write_report` does both and draws the plots. Each section is present only when
the artifacts hold its data.
"""

from __future__ import annotations

import re
from pathlib import Path

from .. import verdicts as v
from ..case_kinds import all_kinds
from ..judge.busy import busy
from ..judge.comparable import label
from ..judge.compare import DEFAULT_THRESHOLD, MIN_RUNS, CaseChange, Comparison, compare, speed_test
from ..judge.scores import SCORE_TOL
from ..records import ReferenceSet, RunRecord
from ..stats.significance import default_floor
from . import (
    figures,
    fmt,
    groups,
    plots,
    reference_pairs,
    references,
    repro,
    resources,
    tables,
)
from .figures import Pair
from .tables import Row

TEMPLATES = Path(__file__).resolve().parent / "templates"
SUMMARY_LINES = 40  # the budget of `--summary`: a PR comment or job summary, not a page
# the order of the summary's verdict table, what a reviewer must see first: regressions and
# failures, then moved scores and suspicious improvements, then the undecided cases (what
# `mibench ab` would decide), then the rest; within a group the largest change first
UNDECIDED = (v.UNTESTED, v.INCONCLUSIVE)
URGENCY = ((v.REGRESSION, v.TIMED_COMPILES, v.MEMORY_REGRESSION, v.COLD_START_REGRESSION,
            v.FAILED, v.MISSING), (v.SCORES_MOVED, v.SUSPICIOUS_IMPROVEMENT), UNDECIDED,
           (v.IMPROVEMENT, v.FIXED, v.STILL_FAILING, v.NOT_COMPARABLE, v.ADDED, v.REMOVED,
            v.SKIPPED))
DECIDE_EACH = 4  # undecided cases given a command each; the rest share one


def method_lines(comp: Comparison) -> list[str]:
    """The methods behind a comparison's verdicts, with their numbers."""
    tol = ", ".join(f"{k} {v:g}" for k, v in SCORE_TOL.items())
    lines = [f"Timing: {comp.methods[0]}. Each worker process's median time per item is one "
             f"sample (one per run without `runs.processes`); the interval of the change is "
             f"at level {1 - comp.alpha:.0%}, and each side's between-run spread is at least "
             f"the noise floor, {comp.floor.value:.0%} ({comp.floor.source}). A case needs "
             f"{MIN_RUNS} timed runs on each side."] if comp.methods else []
    return lines + [f"Scores: the largest |ln new - ln base| over every request, item and "
                    f"label, against the modes tolerance ({tol})."]


def template(name: str):
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    return env.get_template(name)


def comparisons_for(records: list[RunRecord], baseline: RunRecord | None,
                    threshold: float) -> list[Pair]:
    """Against `baseline` when given; otherwise the first artifact is the baseline of the
    others of the same config name at a different commit."""
    if baseline is not None:
        return [Pair(baseline, r, compare(baseline, r, threshold)) for r in records
                if r.run_id != baseline.run_id]
    first = records[0]
    same = [r for r in records[1:] if r.config.get("name") == first.config.get("name")
            and label(r) != label(first)]
    return [Pair(first, r, compare(first, r, threshold)) for r in same]


def fastest_line(rows: list[Row]) -> list[str]:
    """`Fastest: ...` only when the fastest case is faster than the runner-up beyond the
    noise (the between-run test of `compare`); otherwise the line says it is not decided."""
    ok = sorted((r for r in rows if groups.throughput(r) is not None), key=groups.throughput,
                reverse=True)
    if len(ok) < 2:
        return []
    first, second = ok[:2]
    floor = default_floor(first.record.provenance.devices.platform)
    test = speed_test(first.case, second.case, floor.value)
    def name(r: Row) -> str:
        return f"{r.case.case_id} ({fmt.num(groups.throughput(r))} items/s, {r.run})"
    if test is None:
        return [f"Fastest: not decided between {name(first)} and {name(second)} (fewer than "
                f"{MIN_RUNS} timed runs)."]
    diff = (f"time {1 / test.ratio - 1:+.1%} [{1 / test.high - 1:+.1%}, "
            f"{1 / test.low - 1:+.1%}], {1 - test.alpha:.0%} interval, noise floor "
            f"{floor.value:.0%}")
    if test.low > 1:
        return [f"Fastest: {name(first)}, faster than {name(second)}: {diff}."]
    return [f"Fastest: not decided: {name(first)} and {name(second)} are within the noise "
            f"({diff})."]


def summary(rows: list[Row], records: list[RunRecord], comps: list[Comparison],
            pauses: int, baseline: RunRecord | None = None) -> dict:
    counts = {s: sum(r.case.status == s for r in rows) for s in ("ok", "failed", "skipped")}
    checks = [c for r in records for c in (r.parity.checks if r.parity else [])]
    passed = sum(c.passing for c in checks)
    regressed = [f"{c.case_id} ({comp.new}): "
                 + (f"{fmt.interval(c)}, " if c.latency_low is not None else "") + c.reason
                 for comp in comps for c in comp.cases if c.regression]
    regressed += [f"parity {p.key} ({comp.new}): {p.new_status}" for comp in comps
                  for p in comp.parity if p.regression]
    verdicts = [(f"{comp.new}: " if len(comps) > 1 else "") + fmt.verdict_line(comp)
                for comp in comps]
    verdict = "\n\n".join(verdicts) or "no baseline to compare with"
    against = (f" (and the baseline {label(baseline)}, {len(baseline.cases)} cases)"
               if baseline is not None and all(r.run_id != baseline.run_id for r in records)
               else "")
    lines = [f"{len(rows)} cases in {len(records)} artifact(s){against}: {counts['ok']} ok, "
             f"{counts['failed']} failed, {counts['skipped']} skipped."]
    if checks:
        lines.append(f"Parity: {passed} of {len(checks)} checks passed.")
    lines += fastest_line(rows)
    lines += [f"Partial artifact {lab}: the run did not finish (cases measured so far)."
              for lab, r in zip(tables.unique_labels(records), records, strict=True)
              if r.finished_at is None]
    if pauses:
        lines.append(f"{pauses} tail pause(s): timed runs slower than "
                     f"{tables.TAIL_FACTOR}x their case's median.")
    compiled = [r for r in rows if resources.timed_marked(r.case)]
    if compiled:
        names = ", ".join(f"{r.case.case_id} ({r.case.metrics.timed_compiles})"
                          for r in compiled[:3]) + (", ..." if len(compiled) > 3 else "")
        lines.append(f"{len(compiled)} case(s) compiled during their timed runs "
                     f"({resources.TIMED_MARK}): {names}.")
    lines += [f"{comp.new}: {n}" if len(comps) > 1 else n for comp in comps
              for n in fmt.score_notes(comp)]
    warnings = [f"{comp.new}: {w}" for comp in comps for w in comp.warnings]
    return {"verdict": verdict, "lines": lines, "regressions": regressed, "warnings": warnings}


def build_context(records: list[RunRecord], baseline: RunRecord | None = None,
                  threshold: float = DEFAULT_THRESHOLD, title: str | None = None,
                  compiles: list | None = None, refs: ReferenceSet | None = None) -> dict:
    """Every table of the report; a section's value is None (or empty) when it has no data.
    `compiles`: compile artifacts whose HBM estimates go beside the measured peaks;
    `refs`: reference figures to set beside the runs (default: the artifacts' own)."""
    rows = tables.rows_of(records)
    ref_sets = references.reference_sets(records, refs)
    pairs = comparisons_for(records, baseline, threshold)
    comps = [p.comp for p in pairs]
    spread, pauses = tables.spread_table(rows)
    names = sorted({r.config.get("name", "?") for r in records})
    return {
        "title": title or f"mibench report: {', '.join(names)}",
        "summary": summary(rows, records, comps, pauses, baseline),
        "results": tables.results_matrix(rows),
        "resources": resources.resources_table(rows, compiles),
        "speedups": groups.speedups(rows),
        "ab": groups.ab_tables(rows),
        "parity": tables.parity_table(records, passed=False),
        "parity_passed": tables.parity_table(records, passed=True),
        "commits": groups.commit_table(comps),
        "threshold": f"{threshold:.0%}",
        "methods": method_lines(comps[0]) if comps else [],
        "topology": groups.topology(rows),
        "models": groups.model_matrix(rows),
        "ref_figures": references.figures_table(ref_sets),
        "ref_ratios": references.ratio_table(ref_sets, rows),
        "ref_speedups": reference_pairs.speedup_table(ref_sets, rows),
        "ref_parity": reference_pairs.parity_table(ref_sets, records,
                                                   tables.unique_labels(records)),
        "parity_models": groups.parity_by_model(records),
        "spread": spread,
        "batches": tables.batch_table(rows),
        # each case kind's own sections (an http case's latency, servers, capacity, ...)
        **{k: t for kind in all_kinds() for k, t in kind.report_tables(rows, records).items()},
        "environment": tables.environment_table(([baseline] if baseline else []) + records),
        "repro": tables.repro_table(rows),
        "plots": {},
        "_rows": rows,
        "_records": ([baseline] if baseline is not None else []) + records,
        "_pairs": pairs,
    }


def urgent_first(pairs: list[Pair]) -> list[tuple[Pair, CaseChange]]:
    """The cases of the comparisons that are not `unchanged`, in `URGENCY`'s groups, within
    a group the largest change of time per item (either way) first."""
    group = {word: k for k, words in enumerate(URGENCY) for word in words}
    found = [(p, c) for p in pairs for c in p.comp.cases if c.verdict in group]
    return sorted(found, key=lambda pc: (group[pc[1].verdict], pc[1].latency_change is None,
                                         -abs(pc[1].latency_change or 0.0)))


def _verdict_rows(pairs: list[Pair], limit: int) -> tuple[fmt.Table | None, int]:
    """The cases of the comparisons that are not `unchanged`, worst first, at most `limit`
    rows; (table, rows left out)."""
    many = len(pairs) > 1
    found = urgent_first(pairs)
    if not found:
        return None, 0
    body = [([p.comp.new] if many else []) + [
        c.case_id, fmt.num(c.base_ms_per_item, 3), fmt.num(c.new_ms_per_item, 3),
        fmt.interval(c).removeprefix("time "),
        f"**{c.verdict}**" if c.regression else c.verdict] for p, c in found[:limit]]
    header = (["New"] if many else []) + ["Case", "Base ms/item", "New ms/item",
                                          "Time change [interval]", "Verdict"]
    unchanged = sum(c.verdict == "unchanged" for p in pairs for c in p.comp.cases)
    title = "Cases that are not unchanged" + (f" ({unchanged} unchanged not shown)"
                                              if unchanged else "")
    table = fmt.Table(header, body, ["l"] * (2 if many else 1) + ["r"] * 3 + ["l"],
                      title=title, note=fmt.CONVENTION)
    return table, max(0, len(found) - limit)


def decide_lines(pairs: list[Pair]) -> tuple[list[str], list[str]]:
    """(commands, notes): per comparison, `mibench ab BASE NEW CONFIG --case ID` for each
    undecided case (largest change first; past `DECIDE_EACH`, one command for the rest),
    or a note saying what is missing for one."""
    commands, notes = [], []
    for pair in pairs:
        ids = [c.case_id for p, c in urgent_first([pair]) if c.verdict in UNDECIDED]
        if not ids:
            continue
        groups = [[i] for i in ids[:DECIDE_EACH]] + ([ids[DECIDE_EACH:]]
                                                     if ids[DECIDE_EACH:] else [])
        made = [repro.decide_command(pair.base, pair.new, group) for group in groups]
        note = made[0][1]  # one pair, one note
        if made[0][0] is None:
            notes.append(f"{len(ids)} undecided case(s) of {pair.comp.new}: no `mibench ab` "
                          f"command to decide them: {note}")
            continue
        commands += [command for command, _ in made]
        notes += [note] if note else []
    return commands, notes


def _results_rows(rows: list[Row], limit: int) -> tuple[fmt.Table | None, int]:
    """Without a comparison: the cases, fastest first, at most `limit` rows."""
    if not rows:
        return None, 0
    order = sorted(rows, key=lambda r: -(groups.throughput(r) or -1))
    body = [[r.case.case_id, fmt.num(groups.throughput(r)), fmt.mfu(r.case.metrics.mfu),
             fmt.status(r.case)] for r in order[:limit]]
    return fmt.Table(["Case", "Items/s", "MFU", "Status"], body, ["l", "r", "r", "l"],
                     title="Cases, fastest first"), max(0, len(rows) - limit)


def render_summary(context: dict, budget: int = SUMMARY_LINES) -> str:
    """The `--summary` page: the verdict, the summary's lines, and the cases a reviewer
    must see (regressions first; without a baseline, the fastest), cut to `budget` lines
    with a line saying how many were left out."""
    s = context["summary"]
    lines = s["lines"] + [f"Regression: {r}" for r in s["regressions"][:5]]
    lines += [f"Warning: {w}" for w in s["warnings"][:3]]
    extra = len(s["regressions"][5:]) + len(s["warnings"][3:])
    if extra:
        lines.append(f"{extra} more regression(s) and warning(s) in the full report.")
    pairs = context["_pairs"]
    decide, notes = decide_lines(pairs)
    for limit in range(budget, -1, -1):
        table, left = (_verdict_rows(pairs, limit) if pairs
                       else _results_rows(context["_rows"], limit))
        footer = ((f"{left} more case(s) in the full report. " if left else "")
                  + "Full report: `mibench report` without `--summary`.")
        text = render(dict(title=context["title"], summary=s, lines=lines, table=table,
                           footer=footer, decide=decide, decide_notes=notes),
                      "summary.md.j2")
        if len(text.splitlines()) <= budget:
            return text
    kept = text.splitlines()[:budget - 1]  # many comparisons: their verdicts alone overflow
    return "\n".join(kept + [f"_(cut to {budget} lines: the full report has the rest)_"]) + "\n"


def render(context: dict, name: str = "report.md.j2") -> str:
    text = template(name).render(**context)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def draw_plots(context: dict, out: Path) -> dict[str, str]:
    """Plots beside `out` (FILE.md -> FILE-throughput.png, ...): name -> relative link."""
    rows: list[Row] = context["_rows"]
    records: list[RunRecord] = list({r.run_id: r for r in context["_records"]}.values())
    pairs: list[Pair] = context["_pairs"]
    names = dict(zip((r.run_id for r in records), tables.unique_labels(records), strict=True))
    many = len({r.run for r in rows}) > 1
    stem = out.with_suffix("")
    ids, sides = figures.throughput_bars(records, [names[r.run_id] for r in records], pairs)
    ok = [r for r in rows if r.case.status == "ok"]
    subject = figures.plot_subject(records)
    made = {
        "throughput": plots.throughput_chart(ids, sides, Path(f"{stem}-throughput.png"),
                                             subject),
        "spread": plots.spread_chart([(f"{r.run} " if many else "") + r.case.case_id
                                      for r in ok], [r.case.timed_s for r in ok],
                                     Path(f"{stem}-spread.png"), tables.TAIL_FACTOR,
                                     [busy(r.case.load) for r in ok], subject),
        "topology": plots.scaling_chart(groups.topology_lines(rows),
                                        Path(f"{stem}-topology.png"), subject),
        **{k: p for kind in all_kinds()
           for k, p in kind.report_charts(rows, stem, subject).items()},
        "commits": figures.comparison_plot(pairs, names, Path(f"{stem}-commits.png")),
    }
    return {k: p.name for k, p in made.items() if p is not None}


def write_report(records: list[RunRecord], out: Path | None, baseline: RunRecord | None = None,
                 threshold: float = DEFAULT_THRESHOLD, summary: bool = False,
                 compiles: list | None = None, refs: ReferenceSet | None = None) -> str:
    """Render the report; with `out`, also write it and its plots there (not the plots with
    `summary`: the job-summary variant links no images). Returns Markdown."""
    context = build_context(records, baseline, threshold, compiles=compiles, refs=refs)
    if out is not None and not summary:
        context["plots"] = draw_plots(context, out)
    text = render_summary(context) if summary else render(context)
    if out is not None:
        from ..records.io import write_output

        write_output(out, text, "the report")
    return text

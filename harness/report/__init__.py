"""`mibench report`: a Markdown report of one or more artifacts (Jinja2 template
`harness/report/templates/report.md.j2`), PNG plots beside it.

`build_context` gathers the tables (pure: records in, a dict out); `render` fills the
template; `write_report` does both and draws the plots. Each section is present only when
the artifacts hold its data.
"""

from __future__ import annotations

import re
from pathlib import Path

from mibench.harness.records import RunRecord
from mibench.harness.report import fmt, groups, latency, plots, tables
from mibench.harness.report.tables import Row
from mibench.harness.stats.comparable import label
from mibench.harness.stats.compare import DEFAULT_THRESHOLD, MIN_RUNS, Comparison, compare
from mibench.harness.stats.scores import SCORE_TOL

TEMPLATES = Path(__file__).resolve().parent / "templates"


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
                    threshold: float) -> list[Comparison]:
    """Against `baseline` when given; otherwise the first artifact is the baseline of the
    others of the same config name at a different commit."""
    if baseline is not None:
        return [compare(baseline, r, threshold) for r in records
                if r.run_id != baseline.run_id]
    first = records[0]
    same = [r for r in records[1:] if r.config.get("name") == first.config.get("name")
            and label(r) != label(first)]
    return [compare(first, r, threshold) for r in same]


def summary(rows: list[Row], records: list[RunRecord], comps: list[Comparison],
            pauses: int) -> dict:
    counts = {s: sum(r.case.status == s for r in rows) for s in ("ok", "failed", "skipped")}
    checks = [c for r in records for c in (r.parity.checks if r.parity else [])]
    passed = sum(c.status == "passed" for c in checks)
    regressed = [f"{c.case_id} ({comp.new}): " + (f"{fmt.interval(c)}, " if c.low is not None
                                                  else "") + c.reason
                 for comp in comps for c in comp.cases if c.regression]
    regressed += [f"parity {p.key} ({comp.new}): {p.new_status}" for comp in comps
                  for p in comp.parity if p.regression]
    verdicts = [(f"{comp.new}: " if len(comps) > 1 else "") + fmt.verdict_line(comp)
                for comp in comps]
    verdict = "\n\n".join(verdicts) or "no baseline to compare with"
    ok = [r for r in rows if groups.throughput(r) is not None]
    fastest = max(ok, key=groups.throughput, default=None)
    lines = [f"{len(rows)} cases in {len(records)} artifact(s): {counts['ok']} ok, "
             f"{counts['failed']} failed, {counts['skipped']} skipped."]
    if checks:
        lines.append(f"Parity: {passed} of {len(checks)} checks passed.")
    if fastest is not None:
        lines.append(f"Fastest: {fastest.case.case_id} at {fmt.num(groups.throughput(fastest))} "
                     f"items/s ({fastest.run}, {fmt.hardware(fastest.record)}).")
    lines += [f"Partial artifact {lab}: the run did not finish (cases measured so far)."
              for lab, r in zip(tables.unique_labels(records), records, strict=True)
              if r.finished_at is None]
    if pauses:
        lines.append(f"{pauses} tail pause(s): timed runs slower than "
                     f"{tables.TAIL_FACTOR}x their case's median.")
    lines += [f"{comp.new}: {n}" if len(comps) > 1 else n for comp in comps
              for n in fmt.score_notes(comp)]
    warnings = [f"{comp.new}: {w}" for comp in comps for w in comp.warnings]
    return {"verdict": verdict, "lines": lines, "regressions": regressed, "warnings": warnings}


def build_context(records: list[RunRecord], baseline: RunRecord | None = None,
                  threshold: float = DEFAULT_THRESHOLD, title: str | None = None) -> dict:
    """Every table of the report; a section's value is None (or empty) when it has no data."""
    rows = tables.rows_of(records)
    comps = comparisons_for(records, baseline, threshold)
    spread, pauses = tables.spread_table(rows)
    has_models = groups.has_model_matrix(rows)
    names = sorted({r.config.get("name", "?") for r in records})
    return {
        "title": title or f"mibench report: {', '.join(names)}",
        "summary": summary(rows, records, comps, pauses),
        "results": tables.results_matrix(rows),
        "speedups": [] if has_models else groups.speedups(rows),
        "ab": groups.ab_tables(rows),
        "parity": tables.parity_table(records, passed=False),
        "parity_passed": tables.parity_table(records, passed=True),
        "commits": groups.commit_table(comps),
        "threshold": f"{threshold:.0%}",
        "methods": method_lines(comps[0]) if comps else [],
        "topology": groups.topology(rows),
        "models": groups.model_matrix(rows),
        "parity_models": groups.parity_by_model(records),
        "spread": spread,
        "latency": latency.latency_table(rows),
        "servers": latency.servers_table(rows),
        "environment": tables.environment_table(([baseline] if baseline else []) + records),
        "repro": tables.repro_table(rows),
        "plots": {},
        "_rows": rows,
        "_comparisons": comps,
    }


def render(context: dict, name: str = "report.md.j2") -> str:
    text = template(name).render(**context)
    return re.sub(r"\n{3,}", "\n\n", text).rstrip() + "\n"


def draw_plots(context: dict, out: Path) -> dict[str, str]:
    """Plots beside `out` (FILE.md -> FILE-throughput.png, ...): name -> relative link."""
    rows: list[Row] = context["_rows"]
    many = len({r.run for r in rows}) > 1
    names = [(f"{r.run} " if many else "") + r.case.case_id for r in rows]
    stem = out.with_suffix("")
    made = {
        "throughput": plots.throughput_chart(names, [groups.throughput(r) for r in rows],
                                             Path(f"{stem}-throughput.png")),
        "spread": plots.spread_chart(
            [n for n, r in zip(names, rows, strict=True) if r.case.status == "ok"],
            [r.case.timed_s for r in rows if r.case.status == "ok"],
            Path(f"{stem}-spread.png"), tables.TAIL_FACTOR),
    }
    made["topology"] = plots.scaling_chart(groups.topology_lines(rows),
                                           Path(f"{stem}-topology.png"))
    made["latency"] = latency.cdf_chart(rows, Path(f"{stem}-latency.png"))
    comps: list[Comparison] = context["_comparisons"]
    if comps:
        ids = [c.case_id for c in comps[0].cases if c.change is not None]
        changes = {comp.new: [next((c.change for c in comp.cases if c.case_id == i), None)
                              for i in ids] for comp in comps}
        made["commits"] = plots.change_chart(ids, changes, Path(f"{stem}-commits.png"),
                                             comps[0].threshold)
    return {k: p.name for k, p in made.items() if p is not None}


def write_report(records: list[RunRecord], out: Path | None, baseline: RunRecord | None = None,
                 threshold: float = DEFAULT_THRESHOLD, summary: bool = False) -> str:
    """Render the report; with `out`, also write it and its plots there (not the plots with
    `summary`: the job-summary variant links no images). Returns Markdown."""
    context = build_context(records, baseline, threshold)
    if out is not None and not summary:
        context["plots"] = draw_plots(context, out)
    text = render(context)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
    return text

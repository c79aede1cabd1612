"""`mibench compare` on two compile artifacts, rendered: the Markdown table and the JSON of a
`CompileComparison` (harness/judge/compile_compare.py judges; this module only formats)."""

from __future__ import annotations

import json

from ..judge.compile_compare import (
    CaseDiff,
    CompileComparison,
    relative_change,
    roofline_bound,
)
from ..records.outputs import COMPILE_COMPARE_SCHEMA
from ..util import short_number


def _pair(d: CaseDiff, get, unit: str) -> str:
    va = get(d.base) if d.base and d.base.compile else None
    vb = get(d.new) if d.new and d.new.compile else None
    if va == vb:
        return short_number(vb, unit)
    rel = relative_change(va, vb)
    return f"{short_number(va, unit)} -> {short_number(vb, unit)}" + \
        (f" ({rel:+.1%})" if rel is not None else "")


def compile_compare_markdown(r: CompileComparison) -> str:
    t = r.base.target
    lines = [f"# Compile comparison: {r.new.run_id} vs {r.base.run_id}", "",
             f"Target {t.name} ({t.topology}), libtpu {r.base.libtpu.version}, jax "
             f"{r.base.provenance.packages.get('jax')}; gate: stops compiling, stops fitting, "
             f"peak HBM / bytes accessed / FLOPs up more than {r.threshold:.0%}, or the "
             f"roofline bound down more than {r.threshold:.0%} (exact compiled costs and "
             "bound, no noise statistics; compile time informational).", "",
             "| case | status | peak HBM/chip | FLOPs/pass | bytes/pass | roofline items/s | "
             "programs | compile s | verdict |",
             "|---|---|---|---|---|---|---|---|---|"]
    for d in r.cases:
        def pair(get, unit="", d=d):
            return _pair(d, get, unit)
        status = " -> ".join(dict.fromkeys(x.status for x in (d.base, d.new) if x))
        verdict = "REGRESSION: " + "; ".join(d.regressions) if d.regressions else \
            ("; ".join(d.changes) if d.changes else "same")
        lines.append(
            f"| {d.case_id} | {status} | {pair(lambda c: c.compile.hbm_peak_bytes, 'B')} | "
            f"{pair(lambda c: c.compile.flops_per_pass)} | "
            f"{pair(lambda c: c.compile.bytes_accessed_per_pass, 'B')} | {pair(roofline_bound)} | "
            f"{pair(lambda c: len(c.compile.programs))} | "
            f"{pair(lambda c: round(c.compile.compile_s, 1))} | {verdict} |")
    lines.append("")
    if r.regressions:
        lines.append("**Regression** in " + ", ".join(d.case_id for d in r.regressions) + ".")
    else:
        lines.append("No regression.")
    return "\n".join(lines) + "\n"


def compile_compare_json(r: CompileComparison) -> str:
    return json.dumps({
        "schema": COMPILE_COMPARE_SCHEMA, "base": r.base.run_id, "new": r.new.run_id,
        "target": r.base.target.name, "threshold": r.threshold, "exit_code": r.exit_code,
        "cases": [{"case_id": d.case_id, "changes": d.changes, "regressions": d.regressions}
                  for d in r.cases]}, indent=1) + "\n"

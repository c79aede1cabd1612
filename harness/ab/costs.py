"""Compiled cost in `mibench ab`: with a TPU target (`--target`, or the config's
`topology.target`), the JAX cases are compiled for that target by the real TPU compiler
once per revision, each in compile workers that import that revision's engines
(harness/compile/worker.py, bootstrapped from the revision's worktree), and the two sides are
compared exactly as `compare` compares two compile artifacts (judge/compile_compare.py):
a case that stops compiling or fitting, or whose peak HBM, bytes accessed or FLOPs per pass
grow by more than the threshold, is a regression. Compiled costs have no noise, so one
compile per revision is the whole measurement.
"""

from __future__ import annotations

from collections.abc import Callable

from ..compile.runner import compile_cases, row
from ..config.matrix import CaseSpec
from ..judge.compile_compare import diff_case
from ..records.ab import CostCheck
from ..records.compile import CompileCase
from .revisions import Revision


def compile_both(cases: list[CaseSpec], target, lib, sides: dict[str, Revision],
                 threshold: float, note: Callable[[str], None]) -> dict[str, CostCheck]:
    """Each JAX case's CostCheck by case id (torch and http cases are not compiled)."""
    jax_cases = [c for c in cases if c.engine == "jax"]
    if not jax_cases:
        return {}
    compiled: dict[str, dict[str, CompileCase]] = {}
    for name, side in sides.items():
        note(f"compiling {len(jax_cases)} JAX cases for {target.name} at {name} "
             f"({side.commit[:8]})")
        done = compile_cases(jax_cases, target, lib, engine_root=str(side.root),
                             on_case=lambda rec, name=name: note(f"  {name}: {row(rec)}"))
        compiled[name] = {rec.case_id: rec for rec in done}
    checks = {}
    for case in jax_cases:
        base, new = compiled["base"][case.case_id], compiled["new"][case.case_id]
        d = diff_case(case.case_id, base, new, threshold)
        if base.status == "failed":
            message = base.error.message if base.error else ""
            d.changes.append(f"not compared: the base revision does not compile it "
                             f"({message[:200]})")
        checks[case.case_id] = CostCheck(base=base, new=new, changes=d.changes,
                                         regressions=d.regressions)
    return checks

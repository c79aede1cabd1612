"""`ab`'s suspicious improvements (harness/judge/suspicious.py, the rule `compare` and the
nightly apply): a case the rounds call an improvement of 2x or more has the config's
parity checks against the reference, `modes` and `engines`, run for it at the new revision
(a worker from the new side's worktree, on the parity workload); it stays an `improvement`
only when they ran and passed, else it is a `suspicious improvement` (exit 0, named
first). Servers (`engine: http`) are not checked here: their case stays suspicious, saying
so. Nothing runs when no case is that much faster.
"""

from __future__ import annotations

from collections.abc import Callable

from ..case_kinds import kind_of
from ..config import CaseSpec, Config
from ..judge.suspicious import REASON, VOUCHING, suspicious, vouched
from ..records import ABCase, ParityCheck
from ..verdicts import SUSPICIOUS_IMPROVEMENT


def candidates(cases: list[ABCase]) -> list[str]:
    """The case ids whose rounds show an improvement of 2x or more."""
    return [c.case_id for c in cases if c.timing is not None
            and suspicious(c.verdict, c.timing.change, False)]


def new_side_parity(config: Config, cases: list[CaseSpec], engine_root: str,
                    note: Callable[[str], None]) -> list[ParityCheck]:
    """`modes` and `engines` of `cases` at the revision in `engine_root` (servers left
    out): the parity records (an engine that fails is an `error` record)."""
    from ..run import parity
    from ..run.worker import WorkerPool

    own = [c for c in cases if not kind_of(c.engine).no_engine_parity]
    if not own:
        return []
    note(f"ab: {len(own)} case(s) 2x or more faster: their modes/engines parity at the new "
         "revision")
    ref = (config.parity.reference if config.parity else None) or _default_reference()
    pool = WorkerPool(engine_root=engine_root)
    try:
        g = parity.GroupParity(pool, parity.parity_workload(config), ref.model_dump())
        return parity.group_checks(g, own, list(VOUCHING))
    finally:
        pool.close()


def judge(cases: list[ABCase], checks: list[ParityCheck]) -> None:
    """Each case of 2x or more faster by the rule, its `why` saying what the new side's
    parity found."""
    for case in cases:
        if case.timing is None or not suspicious(case.verdict, case.timing.change, False):
            continue
        mine = [c for c in checks if c.case_id == case.case_id]
        found = "; ".join(_line(c) for c in mine) or (
            "none ran for it at the new revision" + kind_of(case.engine).no_engine_parity)
        if vouched(checks, case.case_id):
            case.why += f"; the new side's parity vouches for it: {found}"
        else:
            case.verdict, case.why = SUSPICIOUS_IMPROVEMENT, f"{case.why}; {REASON} ({found})"


def _line(c: ParityCheck) -> str:
    diff = f", max |d ln| {c.max_log_diff:.2g}" if c.max_log_diff is not None else ""
    return f"{c.check} {c.status} against {c.against}{diff}"


def _default_reference():
    from ..config.spec import Reference

    return Reference()

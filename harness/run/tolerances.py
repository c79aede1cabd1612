"""The tolerances of parity's score checks (docs/parity.md, "Tolerances"): every check
judges log scores, by check and dtype (the table: judge/tolerances.py, re-exported here);
a server's checks take its case's `tolerance`."""

from __future__ import annotations

from ..config.matrix import CaseSpec
from ..judge.tolerances import ABS_TOL_SOFTMAX, TOL, tolerances  # noqa: F401 (re-exported)


def server_tolerance(case: CaseSpec, apply_softmax: bool = False) -> float:
    """The log tolerance of a server's score checks: its case's `tolerance`, else the
    modes tolerance of its dtype (float32 1e-5, bfloat16 1e-1)."""
    given = case.http.tolerance if case.http is not None else None
    return given if given is not None else tolerances("modes", case.dtype, apply_softmax)[0]

"""The tolerances of parity's score checks (docs/parity.md, "Tolerances"): every check
judges log scores, by check and dtype (the table: judge/tolerances.py, re-exported here);
a server's checks take its case's `tolerance`."""

from __future__ import annotations

from ..judge.tolerances import ABS_TOL_SOFTMAX, TOL, tolerances  # noqa: F401 (re-exported)

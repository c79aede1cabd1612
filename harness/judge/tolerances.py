"""The tolerances on log scores, by check and dtype: the one table that parity's score
checks (harness/run/tolerances.py adds a server's own `tolerance`), the verdicts' `scores
moved` (judge/scores.py) and the invariance job judge against (docs/parity.md,
"Tolerances")."""

from __future__ import annotations

# the largest |ln a - ln b| allowed, by check and dtype (isolation: the changed_length
# variant; same_length is always 0, bitwise). Measured margins: docs/parity.md. float32
# changed_length is 1e-5, not 1e-6: packed with the dense mask moves the other items'
# log scores by up to 4.8e-6 when item k grows (a longer sequence, summed in another order)
TOL = {"isolation": {"float32": 1e-5, "bfloat16": 1e-1},
       "modes": {"float32": 1e-5, "bfloat16": 1e-1},
       "engines": {"float32": 1e-4, "bfloat16": 1e-1},
       "topologies": {"float32": 1e-5, "bfloat16": 1e-1},
       "concurrency": {"float32": 1e-5, "bfloat16": 1e-1}}
# the largest |a - b| allowed on top, in bfloat16 with apply_softmax true (probabilities
# over the labels, near 0.5); float32's log bound already bounds |a - b| below it
ABS_TOL_SOFTMAX = {"bfloat16": 2e-2}


def tolerances(check: str, dtype: str, apply_softmax: bool) -> tuple[float, float | None]:
    """(log tolerance, absolute tolerance or None) of a check in `dtype`."""
    return TOL[check][dtype], ABS_TOL_SOFTMAX.get(dtype) if apply_softmax else None

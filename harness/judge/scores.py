"""Scores as part of the verdict: two score tables compared as log scores against the
`modes` parity tolerance of the dtype (docs/parity.md), for `compare` and `mibench ab`."""

from __future__ import annotations

import dataclasses
import math

from ..records import CaseRecord
from .tolerances import TOL

# the largest |ln score_new - ln score_base| that is not a score change: the `modes` parity
# tolerance (docs/parity.md)
SCORE_TOL = TOL["modes"]


@dataclasses.dataclass(frozen=True)
class ScoreCheck:
    """The case's scores against the baseline's: the largest |ln new - ln base| and where,
    or why they were not compared."""

    max_log_diff: float | None  # None: not compared
    tolerance: float | None
    moved: bool
    note: str



def max_log_diff(base: list, new: list) -> tuple[float, tuple[int, int, int]] | None:
    """The largest |ln new - ln base| over two score tables and its (request, item, label),
    or None when their shapes differ. A 0 counts as the smallest float (0 against 0 is
    equal); a NaN on either side is an infinite difference."""
    if len(base) != len(new) or any(len(a) != len(b) or any(len(x) != len(y) for x, y in
                                                              zip(a, b, strict=True))
                                     for a, b in zip(base, new, strict=True)):
        return None
    tiny = 2.2250738585072014e-308
    worst, where = 0.0, (0, 0, 0)
    for r, (req_a, req_b) in enumerate(zip(base, new, strict=True)):
        for i, (row_a, row_b) in enumerate(zip(req_a, req_b, strict=True)):
            for j, (a, b) in enumerate(zip(row_a, row_b, strict=True)):
                d = (math.inf if math.isnan(a) or math.isnan(b) else
                     abs(math.log(max(a, tiny)) - math.log(max(b, tiny))))
                if d > worst:
                    worst, where = d, (r, i, j)
    return worst, where


def score_check(base: CaseRecord, new: CaseRecord) -> ScoreCheck:
    """Scores of two ok cases as log scores against the modes tolerance of the dtype."""
    missing = [name for name, c in (("baseline", base), ("new artifact", new))
               if c.scores is None]
    if missing:
        return ScoreCheck(None, None, False,
                          f"scores not compared: none recorded in the {' or '.join(missing)}")
    tol = SCORE_TOL.get(new.model.dtype, max(SCORE_TOL.values()))
    found = max_log_diff(base.scores, new.scores)
    if found is None:
        return ScoreCheck(None, tol, True, "scores moved: the score tables differ in shape")
    diff, (r, i, j) = found
    if diff > tol:
        return ScoreCheck(diff, tol, True, f"scores moved: max |ln score diff| {diff:.3g} > "
                                           f"{tol:g} (request {r}, item {i}, label {j})")
    return ScoreCheck(diff, tol, False, f"scores within {tol:g} (max |ln diff| {diff:.2g})")

"""A speedup too large to trust on its own (docs/verdicts.md): a confirmed improvement of 2x
or more is a `suspicious improvement` unless the new side's `modes`/`engines` parity against
the reference ran for the case and passed, since a mode that scores nothing is fast. One
rule for `compare`, `ab` and the nightly loop: exit 0, named first, and it never moves a
nightly baseline without `accept`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..verdicts import IMPROVEMENT, SUSPICIOUS_IMPROVEMENT

SUSPICIOUS = 0.5  # a confirmed time per item (or call) at half the base or less: 2x faster
VOUCHING = ("modes", "engines")  # the parity checks against the reference that vouch
REASON = ("2x or more faster and the new side's `modes`/`engines` parity against the "
          "reference did not run and pass for it: a mode that scores nothing is fast")


def vouched(checks: Iterable, case_id: str) -> bool:
    """Whether `modes`/`engines` parity checks (ParityCheck records) ran for the case and
    every such check passed."""
    mine = [c for c in checks if c.check in VOUCHING and c.case_id == case_id]
    return bool(mine) and all(c.status == "passed" for c in mine)


def run_vouched(run, case_id: str) -> bool:
    """`vouched` by a run artifact's parity (RunRecord)."""
    return vouched(run.parity.checks if run.parity else [], case_id)


def suspicious(verdict: str, change: float | None, vouched_for: bool) -> bool:
    """Whether an `improvement` whose time changed by `change` (new / base - 1) is a
    `suspicious improvement`: 2x or more faster and not vouched for."""
    return (verdict == IMPROVEMENT and change is not None and change <= SUSPICIOUS - 1
            and not vouched_for)


def flagged(item, vouched_for: bool, change_field: str = "change"):
    """`item` (a frozen dataclass with `verdict`, `reason` and a change field) as a
    `suspicious improvement` when the rule says so, else itself."""
    if not suspicious(item.verdict, getattr(item, change_field), vouched_for):
        return item
    return dataclasses.replace(item, verdict=SUSPICIOUS_IMPROVEMENT,
                               reason=f"{item.reason}; {REASON}")

"""A comparison as data: each case id's change with its verdict (`CaseChange`), and the
whole (`Comparison`): its outcome and exit code, the busy sides, why nothing was compared.
Made by harness/judge/compare.py, written by harness/report/changes.py."""

from __future__ import annotations

import dataclasses

from ..judge.server_compare import MetricChange
from ..stats.significance import METHOD, NoiseFloor, Test
from ..verdicts import EXIT_CODES as OUTCOME_EXIT
from ..verdicts import (
    INCONCLUSIVE,
    NOT_COMPARABLE,
    NOT_COMPARED,
    PASS,
    REGRESSION,
    UNCHANGED,
    UNTESTED,
)
from .busy import BUSY_LEVEL, DECIDER, busy_line
from .environment import ParityChange
from .memory import DEFAULT_MEMORY_THRESHOLD, MemoryCheck
from .scores import ScoreCheck


@dataclasses.dataclass(frozen=True)
class CaseChange:
    """One case id in either artifact. `latency_change`, `latency_low`, `latency_high`: the
    change of time per item, new / base - 1, and its interval (positive: slower), the
    convention every command reports; `items_per_s_change`, `items_per_s_low`,
    `items_per_s_high`: the same as items/s (positive: faster)."""

    case_id: str
    base_status: str | None  # None: not in the baseline
    new_status: str | None  # None: not in the new artifact
    base_items_per_s: float | None = None  # median over the timed runs (from timed_s)
    new_items_per_s: float | None = None
    items_per_s_change: float | None = None  # items/s new / base - 1 (positive: faster)
    items_per_s_low: float | None = None
    items_per_s_high: float | None = None
    latency_change: float | None = None  # of the time per item (positive: slower)
    latency_low: float | None = None  # its interval
    latency_high: float | None = None
    # the per-side centres the change is the ratio of: ms per item (geometric mean of the
    # process medians; the median of the runs with one process)
    base_ms_per_item: float | None = None
    new_ms_per_item: float | None = None
    test: Test | None = None
    scores: ScoreCheck | None = None
    memory: MemoryCheck | None = None  # the case's own peak against the baseline's
    # XLA compilations of the new side's first call and timed runs (None: not counted)
    first_call_compiles: int | None = None
    timed_compiles: int | None = None
    # the share of the CPU other processes held while each side was measured (None: not
    # recorded, an artifact before mibench.run/3); past the busy level: inconclusive
    base_other_load: float | None = None
    new_other_load: float | None = None
    # an slo case: its capacity (the change above is its time per item at the budget);
    # a case with cold starts: launch to ready and first request (judge/server_compare.py)
    capacity: MetricChange | None = None
    cold_start: tuple[MetricChange, ...] = ()
    # a word of harness/verdicts.py: TIMING, CASE
    verdict: str = UNCHANGED
    regression: bool = False
    reason: str = ""

    @property
    def compared(self) -> bool:
        """Measured ok on both sides as the same measurement."""
        return (self.base_status == self.new_status == "ok"
                and self.verdict != NOT_COMPARABLE)


@dataclasses.dataclass(frozen=True)
class Comparison:
    base: str  # labels (short commit or run id)
    new: str
    threshold: float
    alpha: float
    floor: NoiseFloor
    cases: list[CaseChange]
    parity: list[ParityChange]
    warnings: list[str]
    allow_untested: bool = False
    memory_threshold: float = DEFAULT_MEMORY_THRESHOLD
    busy_level: float = BUSY_LEVEL

    @property
    def regression(self) -> bool:
        return any(c.regression for c in self.cases) or any(p.regression for p in self.parity)

    @property
    def compared(self) -> list[CaseChange]:
        return [c for c in self.cases if c.compared]

    @property
    def untested(self) -> list[CaseChange]:
        return [c for c in self.cases if c.verdict == UNTESTED]

    @property
    def inconclusive(self) -> list[CaseChange]:
        return [c for c in self.cases if c.verdict == INCONCLUSIVE]

    @property
    def busy(self) -> list[CaseChange]:
        """Compared cases with a side measured on a busy machine (timing: inconclusive)."""
        return [c for c in self.compared
                if any(x is not None and x > self.busy_level
                       for x in (c.base_other_load, c.new_other_load))]

    def busy_line(self) -> str | None:
        """`new side: other processes held up to 65% of the CPU; `mibench ab` decides it`
        over the busy cases (None: none)."""
        worst = {side: max((x for c in self.busy if (x := getattr(c, f"{side}_other_load"))
                            is not None and x > self.busy_level), default=None)
                 for side in ("base", "new")}
        lines = [busy_line(side, x, up_to=len(self.busy) > 1) for side, x in worst.items()
                 if x is not None]
        return "; ".join(lines + [DECIDER]) if lines else None

    @property
    def outcome(self) -> str:
        """`regression`, `not compared`, `untested` (not allowed) or `pass`."""
        if self.regression:
            return REGRESSION
        if not self.compared:
            return NOT_COMPARED
        if self.untested and not self.allow_untested:
            return UNTESTED
        return PASS

    @property
    def exit_code(self) -> int:
        return OUTCOME_EXIT[self.outcome]

    @property
    def methods(self) -> list[str]:
        return [METHOD] if any(c.test is not None for c in self.cases) else []

    def not_compared_reason(self) -> str:
        """Why no case was compared (for `outcome == "not compared"`)."""
        common = [c for c in self.cases if c.base_status is not None
                  and c.new_status is not None]
        apart = [c for c in common if c.verdict == NOT_COMPARABLE]
        if not common:
            return "the two artifacts have no case id in common"
        if len(apart) == len(common):
            first = apart[0]
            return (f"no case is the same measurement in both ({len(apart)} not comparable; "
                    f"{first.case_id}: {first.reason})")
        counts = {s: sum(c.new_status == s or c.base_status == s for c in common
                         if c.verdict != NOT_COMPARABLE) for s in ("skipped", "failed")}
        return (f"no comparable case ran ok on both sides ({counts['skipped']} skipped, "
                f"{counts['failed']} failed, {len(apart)} not comparable)")

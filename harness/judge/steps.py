"""The steps of one history series and their verdicts (pure: points in, steps out).

- **Change points** (harness.stats.changepoint) are searched among the points measured on
  a machine that was not busy (harness.judge.busy): a busy point is shown, never evidence.
  A change point is a `regression` (slower) or an `improvement`.
- **Suspected steps**: a step of `STEP` (2x) or more in time per item between two
  neighbouring points measured on a machine that was not busy (busy points between them
  skipped), where no change point was found (with one point on each side there are too
  few for one); and between neighbouring points with a busy side, where no such step
  spans them. Judged by the between-run test of `compare`
  (harness.stats.significance) at the noise floor learnt from the folder's A/A runs,
  leaving out the two points' artifacts (harness.judge.noise): beyond the noise it is a
  `regression` or `improvement`, else `inconclusive`; with a busy side it is
  `inconclusive`, naming the side and the share.

Every change is time per item, after / before - 1, `+` = slower.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..stats.changepoint import DEFAULT, Params, binary_segmentation
from ..stats.significance import DEFAULT_ALPHA, NoiseFloor, between_runs
from ..verdicts import CHANGE_POINT, IMPROVEMENT, INCONCLUSIVE, REGRESSION, SUSPECTED_STEP
from .busy import BUSY_LEVEL, busy, busy_reason

STEP = 2.0  # a neighbouring ratio of time per item this large (either way) is looked at


@dataclasses.dataclass(frozen=True)
class Step:
    """A step in a series before the point `index`."""

    index: int  # the first point after the step (into the series' points)
    kind: str  # change point | suspected step (harness/verdicts.py HISTORY)
    before: float  # items/s: the segment's mean (change point), the point's median (step)
    after: float
    latency_change: float  # time per item, after / before - 1 (+ = slower)
    verdict: str  # regression | improvement | inconclusive
    reason: str
    latency_low: float | None = None  # a suspected step: the between-run interval
    latency_high: float | None = None
    p_value: float | None = None  # a change point: the permutation test's

    @property
    def items_per_s_change(self) -> float:
        """The same step as items/s, after / before - 1 (+ = faster)."""
        return self.after / self.before - 1


def judge_steps(points: list, floor_of: Callable[[frozenset[str]], NoiseFloor],
                params: Params = DEFAULT, alpha: float = DEFAULT_ALPHA,
                busy_level: float = BUSY_LEVEL) -> list[Step]:
    """Change points and suspected steps of `points` (history.Point: `items_per_s`,
    `runs`, `other_load`, `run_id`), in order; `floor_of(run_ids)` gives the noise floor
    learnt without those artifacts."""
    quiet = [i for i, p in enumerate(points)
             if p.items_per_s is not None and not busy(p.other_load, busy_level)]
    found = binary_segmentation([points[i].items_per_s for i in quiet], params)
    steps = [Step(index=quiet[cp.index], kind=CHANGE_POINT, before=cp.before, after=cp.after,
                  latency_change=cp.time_change,
                  verdict=REGRESSION if cp.time_change > 0 else IMPROVEMENT,
                  reason=f"a change point of the points measured on a machine that was not "
                         f"busy (p={cp.p_value:.3g})", p_value=cp.p_value) for cp in found]
    spans = []  # (before, after) of the steps between points that are evidence
    for a, b in zip(quiet, quiet[1:], strict=False):  # busy points in between skipped
        if _big(points[a], points[b]) and not any(s.index == b for s in steps):
            steps.append(_suspected(points[a], points[b], b, floor_of, alpha, busy_level))
            spans.append((a, b))
    ok = [i for i, p in enumerate(points) if p.items_per_s is not None]
    for a, b in zip(ok, ok[1:], strict=False):  # a busy side: named, never a verdict
        covered = any(lo <= a and b <= hi for lo, hi in spans) or any(
            s.index == b for s in steps)
        if _big(points[a], points[b]) and not covered:
            steps.append(_suspected(points[a], points[b], b, floor_of, alpha, busy_level))
    return sorted(steps, key=lambda s: s.index)


def _big(before, after) -> bool:
    """A step of STEP or more in time per item, either way."""
    ratio = before.items_per_s / after.items_per_s  # time after / before
    return max(ratio, 1 / ratio) >= STEP


def _suspected(before, after, index: int, floor_of, alpha: float, busy_level: float) -> Step:
    """The verdict of a 2x step between two neighbouring points."""
    common = dict(index=index, kind=SUSPECTED_STEP, before=before.items_per_s,
                  after=after.items_per_s,
                  latency_change=before.items_per_s / after.items_per_s - 1)
    sides = busy_reason({"before": before.other_load, "after": after.other_load}, busy_level)
    if sides is not None:
        return Step(**common, verdict=INCONCLUSIVE, reason=sides)
    if not before.runs or not after.runs:
        return Step(**common, verdict=INCONCLUSIVE, reason="no timed runs to test it on")
    floor = floor_of(frozenset({before.run_id, after.run_id}))
    test = between_runs([list(r) for r in before.runs], [list(r) for r in after.runs],
                        floor.value, alpha)
    level = f"{1 - alpha:.0%}"
    interval = dict(latency_low=test.low - 1, latency_high=test.high - 1)
    if not test.significant:
        return Step(**common, **interval, verdict=INCONCLUSIVE,
                    reason=f"within the noise: its {level} interval includes 0 (noise floor "
                           f"{floor.value:.0%}, {floor.source}); `mibench ab` decides it")
    word = REGRESSION if test.ratio > 1 else IMPROVEMENT
    return Step(**common, **interval, verdict=word,
                reason=f"{STEP:g}x or more between neighbouring points, beyond the noise "
                       f"({level} interval, noise floor {floor.value:.0%}, {floor.source}); "
                       "too few points around it for a change point")


def step_interval(points: list, steps: list[Step], step: Step, floor: float,
                  alpha: float = DEFAULT_ALPHA, busy_level: float = BUSY_LEVEL
                  ) -> tuple[float, float, float] | None:
    """A step's change of time with its interval, (change, low, high), + = slower: a
    suspected step's own; a change point's from `compare`'s between-run test at `floor`
    (harness.stats.significance) of the quiet points of the segment before it (from the
    previous change point) against those of the segment after it (to the next), each
    point's timed runs grouped by worker process. None where a side has no timed runs."""
    if step.kind != CHANGE_POINT:
        if step.latency_low is None:
            return None
        return step.latency_change, step.latency_low, step.latency_high
    cuts = [0] + sorted(s.index for s in steps if s.kind == CHANGE_POINT) + [len(points)]
    k = cuts.index(step.index)

    def runs(lo: int, hi: int) -> list[list[float]]:
        return [list(r) for p in points[lo:hi] if p.runs and not busy(p.other_load, busy_level)
                for r in p.runs if r]

    before, after = runs(cuts[k - 1], step.index), runs(step.index, cuts[k + 1])
    if not before or not after:
        return None
    test = between_runs(before, after, floor, alpha)
    return test.ratio - 1, test.low - 1, test.high - 1

"""The A/B verdict on paired rounds (pure: per-round log ratios in, a verdict out).

Each round measures both revisions in fresh processes. Its log ratio d_i says how much
slower the new revision was in that round:

- calls interleaved (both workers alive, taking turns call by call; harness/ab/interleave.py):
  d_i = median over k of ln(new_k / base_k), the k-th timed calls of the two sides paired,
  so a load that comes and goes within the round falls on both calls of a pair;
- sides one after the other (on a GPU or TPU): d_i = ln(median new / median base).

The test on the rounds' d:

- **Paired t-test on log ratios** (Student 1908; one-sample t on d, two-sided, n - 1
  degrees of freedom, `scipy.stats.t`): the change is exp(mean d) - 1 (a geometric mean of
  the round ratios) and its interval exp(mean d +- t * sd / sqrt(n)) - 1 at level 1 - alpha.
- **Minimum effect**: a change is a regression (improvement) only when p < alpha AND it is
  slower (faster) than `min_effect`, so a real but tiny difference is not a failure.
- Otherwise **unchanged** when the whole interval lies within +-min_effect, else
  **inconclusive** (more rounds would decide it): the words of harness/verdicts.py, the
  same on screen and in the artifact (mibench.ab/3; an older artifact's `no change` reads
  as one of the two, harness/verdicts.py `legacy_verdict`).
- Fewer than 3 rounds: `untested` (the interval has nothing to stand on).

Defaults: alpha 0.01 (a 99% interval), min_effect 5%. Calibrated by `mibench job
calibrate` (A/A false alarms and detection of 20% / 50% slowdowns; docs/reports.md).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

from ..verdicts import IMPROVEMENT, REGRESSION, UNTESTED, within

METHOD = "paired t-test on per-round log ratios"
ALPHA = 0.01
MIN_EFFECT = 0.05
MIN_ROUNDS = 3


@dataclasses.dataclass(frozen=True)
class PairedVerdict:
    """The change new vs base in time per call (positive: slower)."""

    method: str
    rounds: int
    change: float | None  # exp(mean log ratio) - 1
    low: float | None  # interval of the change at level 1 - alpha
    high: float | None
    p_value: float | None
    alpha: float
    min_effect: float
    verdict: str  # regression, improvement, unchanged, inconclusive, untested

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def line(self) -> str:
        """`+23.1% [+18.0%, +28.4%] (99% CI, p=0.0004, 5 rounds)`."""
        if self.change is None:
            return f"untested ({self.rounds} rounds; at least {MIN_ROUNDS} needed)"
        if self.low is None:
            return f"{self.change:+.1%} ({self.rounds} rounds; at least {MIN_ROUNDS} needed)"
        level = f"{(1 - self.alpha) * 100:.4g}%"  # 99%, or 99.67% at alpha / 3 looks
        return (f"{self.change:+.1%} [{self.low:+.1%}, {self.high:+.1%}] ({level} CI, "
                f"p={self.p_value:.2g}, {self.rounds} rounds)")


def timing_line(timing) -> str:
    """`PairedVerdict.line` of a stored verdict (an A/B artifact's `Timing` record)."""
    return PairedVerdict(**timing.model_dump(exclude={"round_log_ratios"})).line()


def paired_test(d: list[float], alpha: float = ALPHA,
                min_effect: float = MIN_EFFECT) -> PairedVerdict:
    """Verdict on the rounds' log ratios d (positive: new slower)."""
    from scipy.stats import t as student

    k = len(d)
    base_args = dict(method=METHOD, rounds=k, alpha=alpha, min_effect=min_effect)
    if k == 0:
        return PairedVerdict(change=None, low=None, high=None, p_value=None,
                             verdict=UNTESTED, **base_args)
    mean = statistics.fmean(d)
    if k < MIN_ROUNDS:
        return PairedVerdict(change=math.expm1(mean), low=None, high=None, p_value=None,
                             verdict=UNTESTED, **base_args)
    se = statistics.stdev(d) / math.sqrt(k)
    if se == 0:
        p = 0.0 if mean != 0 else 1.0
        low = high = mean
    else:
        p = float(2 * student.sf(abs(mean / se), k - 1))
        low, high = map(float, student.interval(1 - alpha, k - 1, loc=mean, scale=se))
    change = math.expm1(mean)
    verdict = within(math.expm1(low), math.expm1(high), min_effect)
    if p < alpha and change > min_effect:
        verdict = REGRESSION
    elif p < alpha and change < -min_effect:
        verdict = IMPROVEMENT
    return PairedVerdict(change=change, low=math.expm1(low), high=math.expm1(high),
                         p_value=p, verdict=verdict, **base_args)

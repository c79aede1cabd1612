"""The A/B verdict on paired rounds (pure: per-round medians in, a verdict out).

Each round measures both revisions one after the other in fresh processes, so a drift of
the machine (load, clock, caches) moves both medians of a round alike. The test works on
the per-round log ratios d_i = ln(median_new_i / median_base_i):

- **Paired t-test on log ratios** (Student 1908; one-sample t on d, two-sided, n - 1
  degrees of freedom, `scipy.stats.t`): the change is exp(mean d) - 1 (a geometric mean of
  the round ratios) and its interval exp(mean d +- t * sd / sqrt(n)) - 1 at level 1 - alpha.
- **Minimum effect**: a change is a regression (improvement) only when p < alpha AND it is
  slower (faster) than `min_effect`, so a real but tiny difference is not a failure.
- Fewer than 3 rounds: `untested` (the interval has nothing to stand on).

Defaults: alpha 0.01 (a 99% interval), min_effect 5%. Calibrated in `nox -s calibrate`
(A/A false alarms and detection of 20% / 50% slowdowns; numbers in the closing note).
"""

from __future__ import annotations

import dataclasses
import math
import statistics

METHOD = "paired t-test on log ratios of per-round medians"
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
    verdict: str  # regression, improvement, no change, untested

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def line(self) -> str:
        """`+23.1% [+18.0%, +28.4%] (99% CI, p=0.0004, 5 rounds)`."""
        if self.change is None:
            return f"untested ({self.rounds} rounds; at least {MIN_ROUNDS} needed)"
        if self.low is None:
            return f"{self.change:+.1%} ({self.rounds} rounds; at least {MIN_ROUNDS} needed)"
        level = f"{1 - self.alpha:.0%}"
        return (f"{self.change:+.1%} [{self.low:+.1%}, {self.high:+.1%}] ({level} CI, "
                f"p={self.p_value:.2g}, {self.rounds} rounds)")


def paired_test(base: list[float], new: list[float], alpha: float = ALPHA,
                min_effect: float = MIN_EFFECT) -> PairedVerdict:
    """Verdict on per-round medians of base and new (the same length, positive)."""
    from scipy.stats import t as student

    pairs = [(b, n) for b, n in zip(base, new, strict=True) if b > 0 and n > 0]
    k = len(pairs)
    base_args = dict(method=METHOD, rounds=k, alpha=alpha, min_effect=min_effect)
    if k == 0:
        return PairedVerdict(change=None, low=None, high=None, p_value=None,
                             verdict="untested", **base_args)
    d = [math.log(n / b) for b, n in pairs]
    mean = statistics.fmean(d)
    if k < MIN_ROUNDS:
        return PairedVerdict(change=math.expm1(mean), low=None, high=None, p_value=None,
                             verdict="untested", **base_args)
    se = statistics.stdev(d) / math.sqrt(k)
    if se == 0:
        p = 0.0 if mean != 0 else 1.0
        low = high = mean
    else:
        p = float(2 * student.sf(abs(mean / se), k - 1))
        half = float(student.ppf(1 - alpha / 2, k - 1)) * se
        low, high = mean - half, mean + half
    change = math.expm1(mean)
    verdict = "no change"
    if p < alpha and change > min_effect:
        verdict = "regression"
    elif p < alpha and change < -min_effect:
        verdict = "improvement"
    return PairedVerdict(change=change, low=math.expm1(low), high=math.expm1(high),
                         p_value=p, verdict=verdict, **base_args)

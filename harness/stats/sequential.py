"""Which level a bisect step sits at (pure: round log ratios in, a word out).

Bisect knows the change it is looking for: GOOD sits at level 0 and BAD at level D, both
as log ratios of time per call against GOOD (D from the confirmation's rounds). A step's
rounds d_1..d_n (`ab` of the commit against GOOD, the paired log ratios of
harness/judge/paired.py) are judged by where their mean sits between two levels `low` and
`high` (0 and D, or the levels of a narrower range once a partial step split it):

- `low`: surely below the midpoint (low + high) / 2: the interval's high end is under it;
- `high`: surely above the midpoint: the interval's low end is over it;
- `between`: surely away from both levels, by more than `margin` (the threshold, as a log
  ratio): the commit made part of the change, another one the rest;
- `undecided`: anything else; more rounds are added and the step judged again.

**The test: repeated confidence intervals** (Jennison & Turnbull, *Group Sequential
Methods*, 2000, ch. 9), Bonferroni-split over the planned looks. Rounds are added in looks
(`looks`: r, 2r, 4r, ... up to the most rounds a step may take, K looks in all); at each
look the interval is the paired t interval mean +- t(1 - alpha / (2K), n - 1) * sd / sqrt(n)
of every round so far. With normal rounds each look's interval misses the true mean with
probability alpha / K, so the chance that any look of a step misses it is at most alpha.
Every wrong word needs a missed mean (a commit at level 0 called `high` or `between` has
an interval whose low end is above 0; one at D called `low` or `between` one whose high
end is under D, wherever the midpoint falls between them), so a step is misjudged with
probability at most alpha, and a search of k steps names a wrong commit with probability
at most k * alpha. tests/test_sequential.py measures the rates on thousands of seeded
synthetic searches, heavy-tailed rounds included.

Unlike a test of equivalence to GOOD (a step cleared only when its interval lies within
the threshold), a no-op commit on a noisy machine is decided as soon as its interval keeps
off the midpoint: telling +0% from +183% takes a few rounds even when telling +0% from
+5% would take hundreds.
"""

from __future__ import annotations

import dataclasses
import functools
import math

LOW, HIGH, BETWEEN, UNDECIDED = "low", "high", "between", "undecided"
METHOD = ("repeated confidence intervals (Jennison & Turnbull), paired t on the rounds' "
          "log ratios, alpha split over the planned looks (Bonferroni)")
MIN_ROUNDS = 3


def looks(first: int, most: int) -> list[int]:
    """The rounds at each look: first, 2 x first, 4 x first, ... while within `most`."""
    out = [max(first, MIN_ROUNDS)]
    while out[-1] * 2 <= most:
        out.append(out[-1] * 2)
    return out


@functools.lru_cache(maxsize=4096)
def _t(p: float, df: int) -> float:
    from scipy.stats import t as student

    return float(student.ppf(p, df))


def interval(d: list[float], alpha: float) -> tuple[float, float, float] | None:
    """(mean, low, high) of the rounds' log ratios at level 1 - alpha (two-sided paired t);
    None with fewer than MIN_ROUNDS rounds."""
    n = len(d)
    if n < MIN_ROUNDS:
        return None
    mean = math.fsum(d) / n
    half = _t(1 - alpha / 2, n - 1) * spread(d) / math.sqrt(n)
    return mean, mean - half, mean + half


@dataclasses.dataclass(frozen=True)
class Level:
    """A level a step is judged against: the mean log ratio against GOOD and its interval
    (GOOD itself: 0 exactly; BAD and a partial step: from their own rounds)."""

    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, d: list[float], alpha: float, n_looks: int) -> Level | None:
        found = interval(d, alpha / max(1, n_looks))
        return None if found is None else cls(*found)


GOOD_LEVEL = Level(0.0, 0.0, 0.0)


def classify(d: list[float], low: Level, high: Level, margin: float, alpha: float,
             n_looks: int) -> str:
    """The level the rounds `d` sit at between `low` and `high` (log ratios against GOOD,
    low below high) at this look of `n_looks`, each look at level 1 - alpha / n_looks.
    `between` needs the step's interval to keep `margin` off both levels' own intervals,
    so a commit at BAD's level is not called partial because BAD's estimate came out
    high."""
    found = interval(d, alpha / max(1, n_looks))
    if found is None:
        return UNDECIDED
    _, lo, hi = found
    above, below = lo > low.high + margin, hi < high.low - margin  # surely off each level
    if above and below:
        return BETWEEN
    mid = (low.mean + high.mean) / 2
    if lo > mid and not below:
        return HIGH
    if hi < mid and not above:
        return LOW
    return UNDECIDED


def settled(high: Level, low: Level = GOOD_LEVEL) -> bool:
    """Whether a level is known well enough to bisect towards: its interval's low end
    lies above the midpoint from `low` (so its estimate is less than twice the truth,
    and the midpoint lies between the two true levels)."""
    return high.low > (low.mean + high.mean) / 2


def describe(d: list[float], alpha: float, n_looks: int) -> str:
    """`+12.0% [+3.1%, +21.7%] (99.7% interval, 10 rounds)` of the rounds against GOOD."""
    level = 1 - alpha / max(1, n_looks)
    found = interval(d, alpha / max(1, n_looks))
    if found is None:
        return f"{len(d)} rounds (at least {MIN_ROUNDS} needed)"
    mean, lo, hi = found
    return (f"{math.expm1(mean):+.1%} [{math.expm1(lo):+.1%}, {math.expm1(hi):+.1%}] "
            f"({level:.1%} interval, {len(d)} rounds)")


def rounds_needed(sd: float, threshold: float, alpha: float = 0.01, most: int = 1000) -> int:
    """The `ab` rounds whose interval for an unchanged case (per-round log-sd `sd`) lies
    within half the threshold, so it can be told within the threshold:
    t(1 - alpha/2, n - 1) * sd / sqrt(n) <= ln(1 + threshold) / 2 (at most `most`)."""
    target = math.log1p(threshold) / 2
    for n in range(MIN_ROUNDS, most + 1):
        if _t(1 - alpha / 2, n - 1) * sd / math.sqrt(n) <= target:
            return n
    return most


def spread(d: list[float]) -> float | None:
    """The sample standard deviation of the rounds' log ratios (None: fewer than 2)."""
    n = len(d)
    if n < 2:
        return None
    mean = math.fsum(d) / n
    return math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))

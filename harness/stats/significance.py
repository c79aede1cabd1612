"""Two-sample significance tests on raw timed samples (pure: lists of floats in, records out).

The regression gate asks: are the new run times really different from the baseline's?

- **Mann-Whitney U** (Mann & Whitney 1947), two-sided, via `scipy.stats.mannwhitneyu`
  (exact p-value for small samples without ties, normal approximation otherwise). Used when
  the samples are large enough for the test to be able to reach `alpha` at all: the smallest
  two-sided exact p-value is 2 / C(n1 + n2, n1), so 4 + 4 runs can (0.029 < 0.05), 3 + 3
  cannot (0.1). Rank-based, so the answer is the same on times and on items/s.
- **Percentile bootstrap** (Efron & Tibshirani 1993, ch. 13) of the ratio of medians
  new / base, `BOOT_RESAMPLES` seeded resamples of each side: used when there are too few
  samples for Mann-Whitney; significant when the (1 - alpha) interval excludes 1.
- **None**: one run on each side leaves nothing to test; `significant` is False.

Measured on seeded normal samples with 10% noise, the share of pairs flagged significant
AND more than 5% slower: 1.3% at 5 + 5 runs (Mann-Whitney), 4.7% at 3 + 3 (bootstrap), 15%
at 2 + 2 (the percentile bootstrap is anti-conservative there): time at least 3 runs.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

BOOT_RESAMPLES = 10_000
BOOT_SEED = 0
MWU = "Mann-Whitney U (two-sided)"
BOOTSTRAP = "bootstrap (percentile interval of the median ratio)"
NONE = "none (one run on each side)"


@dataclasses.dataclass(frozen=True)
class Test:
    """Outcome of one two-sample test of `new` against `base`."""

    method: str  # MWU, BOOTSTRAP or NONE
    n_base: int
    n_new: int
    ratio: float  # median(new) / median(base)
    p_value: float | None = None  # Mann-Whitney only
    low: float | None = None  # bootstrap interval of the ratio
    high: float | None = None
    alpha: float = 0.05
    significant: bool = False

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


def mwu_can_reach(n1: int, n2: int, alpha: float) -> bool:
    """Whether an exact two-sided Mann-Whitney test of n1 and n2 samples can give p < alpha."""
    return n1 > 0 and n2 > 0 and 2 / math.comb(n1 + n2, n1) < alpha


def mann_whitney(base: list[float], new: list[float], alpha: float = 0.05) -> Test:
    """Two-sided Mann-Whitney U test (scipy); significant when p < alpha."""
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(new, base, alternative="two-sided").pvalue)
    return Test(method=MWU, n_base=len(base), n_new=len(new), ratio=_ratio(base, new),
                p_value=p, alpha=alpha, significant=p < alpha)


def bootstrap_ratio(base: list[float], new: list[float], alpha: float = 0.05,
                    resamples: int = BOOT_RESAMPLES, seed: int = BOOT_SEED) -> Test:
    """Percentile bootstrap interval of median(new) / median(base) at level 1 - alpha."""
    import numpy as np

    rng = np.random.default_rng(seed)
    b = np.asarray(base, dtype=float)
    n = np.asarray(new, dtype=float)
    mb = np.median(b[rng.integers(0, len(b), size=(resamples, len(b)))], axis=1)
    mn = np.median(n[rng.integers(0, len(n), size=(resamples, len(n)))], axis=1)
    ratios = mn / mb
    low, high = (float(q) for q in np.quantile(ratios, [alpha / 2, 1 - alpha / 2]))
    return Test(method=BOOTSTRAP, n_base=len(base), n_new=len(new), ratio=_ratio(base, new),
                low=low, high=high, alpha=alpha, significant=not (low <= 1.0 <= high))


def compare_samples(base: list[float], new: list[float], alpha: float = 0.05) -> Test:
    """The test the sample sizes allow: Mann-Whitney U, else bootstrap, else none."""
    if not base or not new:
        raise ValueError("compare_samples needs at least one sample on each side")
    if mwu_can_reach(len(base), len(new), alpha):
        return mann_whitney(base, new, alpha)
    if len(base) > 1 or len(new) > 1:
        return bootstrap_ratio(base, new, alpha)
    return Test(method=NONE, n_base=1, n_new=1, ratio=_ratio(base, new), alpha=alpha)


def _ratio(base: list[float], new: list[float]) -> float:
    mb = statistics.median(base)
    return statistics.median(new) / mb if mb else math.inf

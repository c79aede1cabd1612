"""Change points in a series of per-commit medians (pure: floats in, records out).

Method: binary segmentation (Scott & Knott 1974; Vostrikova 1981) with Welch's unequal-
variance t statistic (Welch 1947). In a segment, every split leaving at least `min_size`
points on each side is scored by Welch's t; the split with the largest |t| is accepted when
the permutation p-value of that maximum (the segment's values shuffled `permutations` times,
as in E-divisive, Matteson & James 2014) is below `alpha` and the two means differ by at
least `min_change` (relative); then both halves are searched again. The permutation test is
exact at any segment size, where Welch's t-distribution approximation is anti-conservative
for 3-point segments (measured: 3% false change points in flat 20-point series vs 1%).
Known limit of binary segmentation: a short excursion that returns to the old level (up
then back down) splits weakly at the first step and may go unseen.
"""

from __future__ import annotations

import dataclasses
import math

METHOD = ("binary segmentation with Welch's t statistic, significance by a permutation test "
          "of the maximum |t| over splits")


@dataclasses.dataclass(frozen=True)
class Params:
    alpha: float = 0.01
    min_size: int = 3
    min_change: float = 0.05
    permutations: int = 999
    seed: int = 0

    def describe(self) -> str:
        return (f"alpha={self.alpha}, min_size={self.min_size}, min_change={self.min_change:.0%}"
                f", permutations={self.permutations}, seed={self.seed}")


DEFAULT = Params()


@dataclasses.dataclass(frozen=True)
class ChangePoint:
    """`index` is the first point of the new segment."""

    index: int
    before: float  # mean of the segment before
    after: float  # mean of the segment after
    t: float
    p_value: float  # permutation p-value of the max |t| over the segment's splits

    @property
    def change(self) -> float:
        """Of the series' values (items/s: positive is faster)."""
        return self.after / self.before - 1 if self.before else math.inf

    @property
    def time_change(self) -> float:
        """The same step as a change of time, before / after - 1 (positive: slower), the
        convention of every report."""
        return self.before / self.after - 1 if self.after else math.inf


def welch_t(x, min_size: int):
    """Welch's t for every split i in [min_size, n - min_size] of each row of x [P, n]:
    (mean(x[:, i:]) - mean(x[:, :i])) / sqrt(var_left / i + var_right / (n - i)). [P, S]"""
    import numpy as np

    n = x.shape[1]
    i = np.arange(min_size, n - min_size + 1)  # [S]
    cs, cq = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)  # [P, n]
    s1, q1 = cs[:, i - 1], cq[:, i - 1]  # [P, S] sums of the left parts
    s2, q2 = cs[:, -1:] - s1, cq[:, -1:] - q1
    n1, n2 = i, n - i
    m1, m2 = s1 / n1, s2 / n2
    v1 = np.maximum(q1 - s1 * m1, 0.0) / np.maximum(n1 - 1, 1)
    v2 = np.maximum(q2 - s2 * m2, 0.0) / np.maximum(n2 - 1, 1)
    se = np.sqrt(v1 / n1 + v2 / n2)
    diff = m2 - m1
    scale = np.abs(x).max(axis=1, keepdims=True) + 1e-300
    flat = se <= 1e-12 * scale  # both sides constant
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(flat, np.where(np.abs(diff) <= 1e-12 * scale, 0.0, np.inf), diff / se)
    return t


def best_split(values: list[float], params: Params) -> tuple[int, float, float] | None:
    """(index, t, p) of the split with the largest |t|; p from `params.permutations` seeded
    permutations of the segment (the max over splits is part of the statistic, so no
    multiple-testing correction is needed). None when the segment is too short."""
    import numpy as np

    if len(values) < 2 * params.min_size:
        return None
    x = np.asarray(values, dtype=float)[None, :]  # [1, n]
    t = welch_t(x, params.min_size)[0]  # [S]
    k = int(np.argmax(np.abs(t)))
    rng = np.random.default_rng(params.seed)
    perms = rng.permuted(np.repeat(x, params.permutations, axis=0), axis=1)  # [P, n]
    null = np.abs(welch_t(perms, params.min_size)).max(axis=1)  # [P]
    p = (1 + int(np.sum(null >= abs(t[k]) - 1e-12))) / (params.permutations + 1)
    return k + params.min_size, float(t[k]), p


def binary_segmentation(values: list[float], params: Params = DEFAULT) -> list[ChangePoint]:
    """All accepted change points of `values`, in order of index."""
    found: list[ChangePoint] = []
    stack = [(0, len(values))]
    while stack:
        lo, hi = stack.pop()
        seg = values[lo:hi]
        split = best_split(seg, params)
        if split is None:
            continue
        i, t, p = split
        before, after = sum(seg[:i]) / i, sum(seg[i:]) / (len(seg) - i)
        big = before and abs(after / before - 1) >= params.min_change
        if p < params.alpha and big:
            found.append(ChangePoint(index=lo + i, before=before, after=after, t=t, p_value=p))
            stack += [(lo, lo + i), (lo + i, hi)]
    return sorted(found, key=lambda c: c.index)

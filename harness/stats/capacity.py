"""Capacity under a latency budget (pure: numbers in, numbers out): how many samples a
percentile needs, its distribution-free interval, when a load step has certainly missed
its budget, when the client rather than the server fell behind, and the bounded search
over the open-loop rate (harness/under_test/slo.py measures; this module decides).

**Samples per step.** The p-th percentile of n latencies is the ceil(q n)-th smallest
(nearest rank, q = p / 100). Its distribution-free 95% interval is a pair of order
statistics (the number of samples below the true percentile is Binomial(n, q)); its upper
end lies inside the sample only when P(all n below the percentile) = q^n <= 2.5%, i.e.
n >= ln(0.025) / ln(q): 368 for p99, 72 for p95, 36 for p90, 6 for p50. With fewer samples
the sample cannot bound the percentile from above, so a step that "meets" the budget would
prove nothing: `min_samples` is the default and the least a config may ask for.

**The search.** Rates grow by FACTOR from `start` until one misses the budget (or `max`
meets it: the budget never binds, no capacity is claimed), or shrink by FACTOR until one
meets it (or `min` misses: not met); then the bracket [highest met, lowest missed] is cut
at its geometric middle until missed / met <= 1 + precision. The capacity is the highest
rate that met the budget, always below a rate tried that missed it. A step whose client
fell behind its schedule stops the search: that rate says nothing of the server.

**A saturated client.** A send more than `late_after(rate)` after its arrival is late. A
busy machine wakes the sender a few ms late now and then, which hardly changes the offered
load; a client that cannot offer the rate falls behind on most sends. So a step's client is
saturated only when the one-sided 95% Clopper-Pearson lower bound of its late share is
above MAX_LATE_SHARE (5 late of 36 sends, 8 of 72, 27 of 368), not on a share observed
above it by chance (2 of 36).
"""

from __future__ import annotations

import dataclasses
import math

from .describe import nearest_rank  # the one nearest-rank percentile (here: sorted ms)

CONFIDENCE = 0.95
FACTOR = 2.0  # the search's step while it brackets the budget
LATE_MIN_S = 0.010  # a send this late after its arrival is late whatever the rate
LATE_GAP_SHARE = 0.5  # ... or half the mean gap between arrivals, if larger
MAX_LATE_SHARE = 0.05  # surely more late sends than this: the client could not offer the rate


def min_samples(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The fewest samples whose order statistics hold a two-sided `confidence` interval of
    the `percentile` (module docstring): ceil(ln((1 - c) / 2) / ln(q))."""
    q = percentile / 100
    return max(1, math.ceil(math.log((1 - confidence) / 2) / math.log(q) - 1e-9))


def samples_why(percentile: float, n: int) -> str:
    """Why `n` samples per step: the sentence a record and the docs carry."""
    need = min_samples(percentile)
    return (f"{n} requests per step; the p{percentile:g}'s distribution-free 95% interval "
            f"(order statistics) has its upper end inside the sample only from {need} on "
            f"({percentile / 100:g}^n <= 2.5%)")


def percentile_interval(sorted_ms: list[float], percentile: float,
                        confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """The distribution-free interval of the percentile: the order statistics l and u with
    P(l <= rank < u) >= confidence for rank ~ Binomial(n, q); an end beyond the sample is
    None."""
    from scipy.stats import binom

    n, q = len(sorted_ms), percentile / 100
    if n == 0:
        return None, None
    alpha = (1 - confidence) / 2
    lo = int(binom.ppf(alpha, n, q))  # samples below the percentile, at least lo
    hi = int(binom.ppf(1 - alpha, n, q)) + 1
    return (sorted_ms[lo - 1] if lo >= 1 else None, sorted_ms[hi - 1] if hi <= n else None)


def certain_miss(over_budget: int, n: int, percentile: float) -> bool:
    """Whether `over_budget` of a step's `n` requests over the budget already put its
    nearest-rank percentile over it, whatever the others do."""
    rank = max(1, math.ceil(percentile / 100 * n - 1e-9))
    return over_budget >= n - rank + 1


def decided_miss(over: int, failed: int, overdue: int, n: int, percentile: float,
                 max_failed: int) -> bool:
    """Whether a step of `n` requests surely misses: `over` answered over the budget,
    `failed` failed (more than `max_failed` misses) and `overdue` still in flight past the
    budget, each of which ends over it or failed, whatever the rest do."""
    return all(failed + j > max_failed or certain_miss(over + overdue - j, n, percentile)
               for j in range(overdue + 1))


def late_after(rate: float) -> float:
    """Seconds after its arrival a send counts as late at `rate`."""
    return max(LATE_MIN_S, LATE_GAP_SHARE / rate)


@dataclasses.dataclass(frozen=True)
class Judged:
    """A step against the budget: `meets`, whether its client fell behind, and why."""

    meets: bool
    saturated: bool
    why: str


def late_share_low(late: int, sent: int) -> float:
    """The one-sided 95% Clopper-Pearson lower bound of a late share of `late` of `sent`."""
    from scipy.stats import binomtest

    if late == 0 or sent == 0:
        return 0.0
    ci = binomtest(late, sent, alternative="greater").proportion_ci(CONFIDENCE, method="exact")
    return float(ci.low)


def saturated(late: int, sent: int) -> bool:
    """Whether a step's client surely sent more than MAX_LATE_SHARE of its requests late."""
    return late_share_low(late, sent) > MAX_LATE_SHARE


def judge_step(latencies_ms: list[float], sent: int, failed: int, late: int,
               percentile: float, budget_ms: float, max_error_rate: float,
               stopped_early: bool = False) -> Judged:
    """A step meets the budget when the percentile of its answered requests is within it,
    its failed share within `max_error_rate`, and its client kept to the schedule."""
    p = f"p{percentile:g}"
    if saturated(late, sent):
        return Judged(False, True, f"the client sent {late} of {sent} requests late (95% "
                                   f"Clopper-Pearson lower bound {late_share_low(late, sent):.1%}"
                                   f" > {MAX_LATE_SHARE:.0%}): it could not offer the rate, so "
                                   "the step says nothing of the server")
    rate = failed / sent if sent else 1.0
    over = sum(1 for x in latencies_ms if x > budget_ms)
    if stopped_early:
        return Judged(False, False, f"stopped after {sent} requests: {over} answered over "
                                    f"{budget_ms:g} ms and {failed} failed already decide "
                                    f"the p{percentile:g} against the budget")
    if rate > max_error_rate:
        return Judged(False, False, f"{failed} of {sent} requests failed ({rate:.1%} > "
                                    f"{max_error_rate:.1%})")
    if not latencies_ms:
        return Judged(False, False, "no request was answered")
    value = nearest_rank(sorted(latencies_ms), percentile)
    if value > budget_ms:
        return Judged(False, False, f"{p} {value:.0f} ms > {budget_ms:g} ms")
    return Judged(True, False, f"{p} {value:.0f} ms <= {budget_ms:g} ms, {failed} failed")


@dataclasses.dataclass
class RateSearch:
    """The bounded search (module docstring): `next_rate()` says what to measure (None:
    done), `observe(rate, judged)` takes its outcome; `status` and `rate`/`bound` say what
    was found."""

    start: float
    low: float  # min_rate
    high: float  # max_rate
    precision: float
    max_steps: int
    met: float | None = None  # the highest rate that met the budget
    missed: float | None = None  # the lowest rate above it that missed it
    steps: int = 0
    status: str | None = None  # set when the search ends

    def next_rate(self) -> float | None:
        if self.status is not None:
            return None
        if self.steps >= self.max_steps:
            self.status = "imprecise"
            return None
        if self.steps == 0:
            return min(max(self.start, self.low), self.high)
        if self.met is not None and self.missed is not None:
            if self.missed / self.met <= 1 + self.precision:
                self.status = "found"
                return None
            return math.sqrt(self.met * self.missed)
        if self.missed is None:  # everything met so far: go up
            if self.met >= self.high:
                self.status = "not bound"
                return None
            return min(self.met * FACTOR, self.high)
        if self.missed <= self.low:  # everything missed so far, down to the floor
            self.status = "not met"
            return None
        return max(self.missed / FACTOR, self.low)

    def observe(self, rate: float, judged: Judged) -> None:
        self.steps += 1
        if judged.saturated:
            self.status = "client saturated"
        elif judged.meets:  # every rate proposed lies above `met` and below `missed`
            self.met = rate
        else:
            self.missed = rate

    def result(self) -> tuple[float | None, float | None]:
        """(capacity, bound): the highest rate met and the lowest missed above it, when
        the budget binds between them ("found", or "imprecise" with a bracket)."""
        if self.status in ("found", "imprecise") and self.met is not None \
                and self.missed is not None:
            return self.met, self.missed
        return None, None


MAX_BACKOFFS = 2  # a rate that did not hold: this many steps of one precision down, at most


def back_off(rate: float, precision: float, min_rate: float) -> float | None:
    """The rate one precision step below a rate that did not hold (None: below min_rate)."""
    lower = rate / (1 + precision)
    return lower if lower >= min_rate else None


def held(met: int, repeats: int) -> bool:
    """Whether the rate a search found held when measured again: met in a majority of its
    `repeats`, more than half (2 of 3, 3 of 4; none asked: nothing to contradict it). Met
    in half or fewer, the search's own step was luck (the knee, where one arrival seed
    meets the budget and the next misses it) or the load changed under it: the rate is
    backed off, and where no rate holds no capacity is claimed (`not held`)."""
    return repeats == 0 or 2 * met > repeats

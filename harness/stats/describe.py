"""Pure statistics over lists of run times, and a case's runs as the statistics see them
(items per run, runs by worker process, medians from the raw times): no I/O, no
formatting."""

from __future__ import annotations

import math
import statistics

from ..records import CaseRecord, Latency, Summary


def summarize(values: list[float]) -> Summary | None:
    """Median, mean, min, max and the sample standard deviation (n-1; 0 for one value),
    as in Python's `statistics` module. None for no values."""
    if not values:
        return None
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return Summary(median=statistics.median(values), mean=statistics.fmean(values),
                   min=min(values), max=max(values), stdev=stdev, n=len(values))


def median(summary: Summary | None) -> float | None:
    """A summary's median; None for no summary (a failed or skipped case)."""
    return None if summary is None else summary.median


def rates(times_s: list[float], amount: float) -> list[float]:
    """`amount` per second for each time (items/s from run times); inf-safe for 0 s."""
    return [amount / t if t > 0 else math.inf for t in times_s]


def per_unit_ms(times_s: list[float], amount: float) -> list[float]:
    """Milliseconds per unit of `amount` for each time (latency per item)."""
    return [1000.0 * t / amount for t in times_s]


def items_of(case: CaseRecord) -> int | None:
    """Items scored per run: the workload's count, else the score table's rows."""
    n = case.workload.num_items
    if isinstance(n, int) and n > 0:
        return n
    return sum(len(req) for req in case.scores) if case.scores else None


def items_per_s(case: CaseRecord) -> float | None:
    """Median items/s over the timed runs, from the raw times (None: no runs or count)."""
    n = items_of(case)
    return statistics.median(rates(case.timed_s, n)) if n and case.timed_s else None


def ms_per_item(case: CaseRecord) -> float | None:
    """Median ms per item over the timed runs, from the raw times (None: no runs or count)."""
    n = items_of(case)
    return 1e3 * statistics.median(case.timed_s) / n if n and case.timed_s else None


def process_runs(case: CaseRecord) -> list[list[float]]:
    """The timed runs grouped by worker process (one group without `process_timed_s`)."""
    return [list(p) for p in case.process_timed_s if p] or [list(case.timed_s)]


def nearest_rank(values: list[float], p: float) -> float:
    """The p-th percentile as an observed value: the ceil(p/100 * n)-th smallest (numpy's
    `inverted_cdf` method, Hyndman & Fan's definition 1); a rank that float arithmetic puts
    a hair above a whole number (0.999 * 1000) counts as that number."""
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(p / 100 * len(ordered) - 1e-9)) - 1])


def latency_of(ms: list[float]) -> Latency | None:
    """Nearest-rank p50, p90, p99, the max and the mean of `ms`; None for no values."""
    if not ms:
        return None
    return Latency(p50_ms=nearest_rank(ms, 50), p90_ms=nearest_rank(ms, 90),
                   p99_ms=nearest_rank(ms, 99), max_ms=max(ms), mean_ms=sum(ms) / len(ms),
                   n=len(ms))

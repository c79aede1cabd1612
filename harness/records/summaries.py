"""A case's runs as the statistics see them (records in, summary records out): the
`Summary` and `Latency` records of a list of values, items per run, runs by worker
process, medians from the raw times. The arithmetic is harness/stats/describe.py's."""

from __future__ import annotations

import statistics

from ..stats.describe import nearest_rank, rates
from .run import CaseRecord, Latency, Summary


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


def latency_of(ms: list[float]) -> Latency | None:
    """Nearest-rank p50, p90, p99, the max and the mean of `ms`; None for no values."""
    if not ms:
        return None
    return Latency(p50_ms=nearest_rank(ms, 50), p90_ms=nearest_rank(ms, 90),
                   p99_ms=nearest_rank(ms, 99), max_ms=max(ms), mean_ms=sum(ms) / len(ms),
                   n=len(ms))

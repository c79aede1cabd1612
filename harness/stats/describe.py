"""Pure statistics over lists of run times (numbers in, numbers out): rates, per-unit
times, the nearest-rank percentile and one A/B round's log ratio. No records, no I/O, no
formatting; a case's runs as these functions see them: harness/records/summaries.py."""

from __future__ import annotations

import math
import statistics


def rates(times_s: list[float], amount: float) -> list[float]:
    """`amount` per second for each time (items/s from run times); inf-safe for 0 s."""
    return [amount / t if t > 0 else math.inf for t in times_s]


def per_unit_ms(times_s: list[float], amount: float) -> list[float]:
    """Milliseconds per unit of `amount` for each time (latency per item)."""
    return [1000.0 * t / amount for t in times_s]


def nearest_rank(values: list[float], p: float) -> float:
    """The p-th percentile as an observed value: the ceil(p/100 * n)-th smallest (numpy's
    `inverted_cdf` method, Hyndman & Fan's definition 1); a rank that float arithmetic puts
    a hair above a whole number (0.999 * 1000) counts as that number."""
    ordered = sorted(values)
    return float(ordered[max(1, math.ceil(p / 100 * len(ordered) - 1e-9)) - 1])


def round_log_ratio(base_s: list[float], new_s: list[float], interleaved: bool
                    ) -> float | None:
    """One A/B round's d from both sides' timed calls (seconds), None without a positive
    pair: the median of the k-th calls' log ratios when the calls were interleaved, else
    the log ratio of the medians (harness/judge/paired.py judges the rounds' d)."""
    if interleaved:
        logs = [math.log(n / b) for b, n in zip(base_s, new_s, strict=False)
                if b > 0 and n > 0]
        return statistics.median(logs) if logs else None
    base_pos, new_pos = [b for b in base_s if b > 0], [n for n in new_s if n > 0]
    if not base_pos or not new_pos:
        return None
    return math.log(statistics.median(new_pos) / statistics.median(base_pos))

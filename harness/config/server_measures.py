"""What an http case can measure of its server beyond one load (docs/configs.md): `slo`,
its capacity under a latency budget; `concurrency`, the trials of the `concurrency` parity
check on fresh launches; `prefix_cache`, the trials of the `prefix_cache` parity check and
the server arguments that turn its cache off (the control); `cold_start`, fresh launches
timed from start to ready and to a first answer. Validated here; carried to the runner as
plain dataclasses (config/cases.py).

    slo: {p99_ms: 500, max_error_rate: 0.01, start_rate: 2, max_rate: 64}
    concurrency: {trials: 5, max_fail_rate: 0.2}
    prefix_cache: {trials: 3, cache_off: {disable_radix_cache: true}}
    cold_start: {launches: 5, warm_requests: 5}
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, PositiveInt, model_validator

from ..stats.capacity import min_samples
from .base import Finite, Rate, Strict
from .bounds import at_most
from .server import ServerArg

PERCENTILES = {"p50_ms": 50.0, "p90_ms": 90.0, "p95_ms": 95.0, "p99_ms": 99.0,
               "p999_ms": 99.9}
MAX_STEPS = 64


class Slo(Strict):
    """A latency budget on one percentile of the answered requests (exactly one of the
    `pXX_ms` keys), the failed share a step may have, and the search's bounds: `start_rate`
    (requests/s), `min_rate`, `max_rate`, `precision` (relative: the search stops when the
    lowest rate that missed is within 1 + precision of the highest that met), `requests`
    per step (default and least: what the percentile needs, stats/capacity.py), `repeats`
    at the rate found (an interval for compare and ab) and `max_steps`."""

    p50_ms: Finite | None = None
    p90_ms: Finite | None = None
    p95_ms: Finite | None = None
    p99_ms: Finite | None = None
    p999_ms: Finite | None = None
    max_error_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.0
    start_rate: Rate = 1.0
    min_rate: Rate | None = None  # default start_rate / 64
    max_rate: Rate | None = None  # default start_rate * 64
    precision: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = 0.1
    requests: Annotated[PositiveInt, Field(le=100_000)] | None = None
    repeats: Annotated[PositiveInt, Field(le=100)] = 3
    max_steps: Annotated[PositiveInt, Field(le=MAX_STEPS)] = 16

    @model_validator(mode="after")
    def _one_budget(self):
        given = [k for k in PERCENTILES if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one budget ({', '.join(PERCENTILES)}), e.g. "
                             f"p99_ms: 500; got {', '.join(given) or 'none'}")
        need = min_samples(PERCENTILES[given[0]])
        if self.requests is not None and self.requests < need:
            raise ValueError(f"requests: {self.requests} per step cannot bound the "
                             f"{given[0][:-3]} (its 95% interval needs at least {need})")
        low, high = self.rates()
        if not low <= self.start_rate <= high:
            raise ValueError(f"start_rate {self.start_rate:g} lies outside [min_rate "
                             f"{low:g}, max_rate {high:g}]")
        return self

    def budget(self) -> tuple[float, float]:
        """(percentile, budget in ms)."""
        key = next(k for k in PERCENTILES if getattr(self, k) is not None)
        return PERCENTILES[key], getattr(self, key)

    def rates(self) -> tuple[float, float]:
        """(min_rate, max_rate) with their defaults."""
        low = self.min_rate if self.min_rate is not None else self.start_rate / 64
        high = self.max_rate if self.max_rate is not None else self.start_rate * 64
        return max(low, 1 / 3600), high


class Concurrency(Strict):
    """The `concurrency` check of this case's server: `trials` fresh launches (a server
    that is not launched: trials on the running one), and the fail rate it may have."""

    trials: Annotated[PositiveInt, at_most("concurrency.trials")] = 1
    max_fail_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.0


class PrefixCache(Strict):
    """The `prefix_cache` check of this case's server: `trials` fresh launches as the case
    starts it (its cache on), each beside a fresh launch with `cache_off` (server arguments
    over the case's, e.g. `{disable_radix_cache: true}`: the same server with its cache
    off, the control), and the fail rate allowed."""

    cache_off: Annotated[dict[str, ServerArg], Field(min_length=1)]
    trials: Annotated[PositiveInt, at_most("prefix_cache.trials")] = 3
    max_fail_rate: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.0


class ColdStart(Strict):
    """`launches` fresh starts of the case's launched server, each timed to ready, then its
    first request and `warm_requests` more one at a time."""

    launches: Annotated[PositiveInt, at_most("cold_start.launches")] = 3
    warm_requests: Annotated[PositiveInt, Field(le=1000)] = 5

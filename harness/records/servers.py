"""What a run records of a server under test beyond one load (docs/artifacts.md): its
capacity under a latency budget (`CaseRecord.slo`), its cold starts (`CaseRecord.
cold_start`) and the fresh launches of the `concurrency` check (`ParityCheck.trials`).
All optional fields of mibench.run/3: artifacts without them read unchanged."""

from __future__ import annotations

from typing import Literal

from .base import Measured, Record
from .busy import CaseLoad


class SloStep(Record):
    """One open-loop load at `rate` requests/s (Poisson arrivals, seeded by `seed`): a point
    of the latency-versus-rate curve, judged against the budget."""

    rate: float  # offered, requests/s
    seed: int  # of the arrival times and of the requests' workloads
    sent: int
    ok: int
    error_rate: float
    stopped_early: bool = False  # enough requests over the budget to fail it: not all sent
    duration_s: Measured = None  # first send to last answer
    achieved_rate: Measured = None  # answered requests/s over duration_s
    items_per_s: Measured = None  # items of answered requests per second
    p50_ms: Measured = None
    p90_ms: Measured = None
    p99_ms: Measured = None
    max_ms: Measured = None
    percentile_ms: Measured = None  # the budget's percentile, nearest rank, answered ones
    # its distribution-free 95% interval (order statistics; None: beyond the sample)
    percentile_low_ms: Measured = None
    percentile_high_ms: Measured = None
    over_budget: int = 0  # answered requests slower than the budget
    late_share: float = 0.0  # sent later than their arrival by more than `late_s`
    late_s: float = 0.0
    lag_p99_ms: Measured = None
    client_saturated: bool = False  # more than MAX_LATE_SHARE late: the client, not the server
    meets: bool  # the percentile within the budget and the error rate within its bound
    why: str  # e.g. "p99 612 ms > 500 ms" or "p99 310 ms <= 500 ms, 0 errors"


class SloRecord(Record):
    """The capacity search of an http case with `slo:` (harness/under_test/slo.py)."""

    percentile: float  # e.g. 99
    budget_ms: float
    max_error_rate: float
    precision: float  # the search stops when (lowest failing) / (highest passing) <= 1 + it
    requests_per_step: int
    min_requests: int  # the fewest the percentile needs (stats/capacity.py min_samples)
    samples_why: str
    start_rate: float
    min_rate: float
    max_rate: float
    max_steps: int
    steps: list[SloStep] = []  # the curve walked, in the order measured
    # found: the budget binds between `rate` and `bound`; not bound: met at max_rate; not
    # met: missed at min_rate; client saturated: the client could not offer a rate;
    # imprecise: max_steps ran out before the precision; not held: the rate found, and up
    # to two precision steps below it, met the budget in no majority of their repeats; failed: an
    # error stopped it
    status: Literal["found", "not bound", "not met", "client saturated", "imprecise",
                    "not held", "failed"]
    rate: Measured = None  # the highest rate that met the budget
    bound: Measured = None  # the lowest rate above it that missed it
    repeats: list[SloStep] = []  # measurements at `rate`, each a fresh arrival seed
    met_repeats: int = 0
    items_per_s: Measured = None  # at the budget: the median over the repeats
    note: str = ""


class ColdStartLaunch(Record):
    """One fresh launch: from starting the server to its ready probe's 200, its first
    request (request 0 of the workload), then `warm_requests` more one at a time."""

    launch: int
    ready_s: Measured = None
    first_ms: Measured = None
    warm_p50_ms: Measured = None  # the median of the warm requests
    first_over_warm: Measured = None  # first_ms / warm_p50_ms
    error: str | None = None


class ColdStartRecord(Record):
    """Cold starts of an http case with `cold_start:` (harness/under_test/cold_start.py)."""

    launches: list[ColdStartLaunch] = []
    warm_requests: int
    ready_s: Measured = None  # medians over the launches that came up
    first_ms: Measured = None
    warm_p50_ms: Measured = None
    load: CaseLoad | None = None  # over the launches: how busy the machine was
    note: str = ""


class ConcurrencyTrial(Record):
    """One trial of the `concurrency` check, on a fresh launch for a launched server."""

    trial: int
    status: Literal["passed", "failed", "error"]
    startup_s: Measured = None  # launch to ready (a fresh launch)
    max_log_diff: Measured = None
    moved_requests: int = 0
    moved_items: int = 0
    # where in the server's life the scores moved (harness/under_test/concurrency.py `WHEN`)
    when: list[str] = []
    moved: list[str] = []  # the largest moves, one line each
    error: str | None = None

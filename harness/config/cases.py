"""What one expanded case is (`CaseSpec`, with its run counts, a `RunsRecord`, and, for an
http case, its `HttpPlan`): plain frozen dataclasses that the runner sends to engine workers.

This module imports nothing of `mibench.engines`: a worker of `mibench ab` runs another
revision's engines under this harness, and unpickling a case must not depend on names
those engines may lack (harness/ab/revisions.py probes what a worker imports).
"""

from __future__ import annotations

import dataclasses

from mibench.workloads import WorkloadSpec

from ..case_kinds import kind_of
from ..records.case import RunsRecord
from .keys import EngineKey, ServerRef, case_id
from .server import ServerLaunch


@dataclasses.dataclass(frozen=True)
class SloPlan:
    """An http case's latency budget and capacity search (config/server_measures.py `Slo`,
    harness/under_test/slo.py): `percentile` of the answered requests within `budget_ms`,
    `requests` per step."""

    percentile: float
    budget_ms: float
    max_error_rate: float
    start_rate: float
    min_rate: float
    max_rate: float
    precision: float
    requests: int
    repeats: int
    max_steps: int

    def label(self) -> str:
        """`p99:500ms`, the case id's part."""
        return f"p{self.percentile:g}:{self.budget_ms:g}ms"


@dataclasses.dataclass(frozen=True)
class HttpPlan:
    """An `engine: http` case's server and load (docs/configs.md): `clients` requests in
    flight (closed loop) or Poisson arrivals at `rate` requests/s (open loop, seeded by the
    workload's seed); `warmup_requests` untimed, then `requests` measured; the case fails
    when more than `max_error_rate` of them fail. Each request gets its own workload (the
    workload's seed + the request's index) unless `same_query`."""

    base_url: str | None = None  # None when mibench launches the server (`launch`)
    served_model: str | None = None
    timeout_s: float = 60.0
    clients: int | None = None
    rate: float | None = None
    requests: int = 100
    warmup_requests: int = 1
    max_error_rate: float = 0.0
    same_query: bool = False
    # engines/wires: how requests are put to the server. engines/wires.DEFAULT_WIRE, written
    # here because this module imports no engines (tests/test_wires.py checks they agree)
    wire: str = "sglang"
    launch: ServerLaunch | None = None  # how mibench starts the server, with its arguments
    slo: SloPlan | None = None  # a capacity search instead of one load at clients or rate
    trials: int = 1  # the concurrency check's trials (fresh launches)
    max_fail_rate: float = 0.0  # the concurrency check's fail rate allowed
    # the prefix_cache check: its trials (0: the case has no `prefix_cache` section), the
    # fail rate allowed, and the server arguments that turn the server's cache off
    prefix_trials: int = 0
    prefix_max_fail_rate: float = 0.0
    cache_off: tuple[tuple[str, object], ...] = ()
    # the largest |d ln score| the server's score checks allow (None: the dtype's default)
    tolerance: float | None = None
    cold_starts: int = 0  # fresh launches timed to ready and to a first answer
    warm_requests: int = 5  # after each cold start's first request, one at a time

    @property
    def server(self) -> ServerRef:
        """The server of the http engine key (what builds the http engine); a launched
        server's names its launch instead of an address (bound to the live base_url when
        it starts: harness/under_test/pool.py)."""
        launched = self.launch is not None and self.base_url is None
        return ServerRef(base_url=self.base_url, served_model=self.served_model,
                         timeout_s=self.timeout_s, wire=self.wire,
                         launch=self.launch if launched else None)

    def at(self, base_url: str) -> HttpPlan:
        """This plan with its launched server's live address (what the engine was built
        with)."""
        return dataclasses.replace(self, base_url=base_url)

    def as_dict(self) -> dict:
        """The case keys this plan differs from the defaults in (a case's `params`); a
        launched server's arguments as `server_args`, its name as `server`."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "launch" and getattr(self, f.name) != f.default}
        if self.slo is not None:
            out["slo"] = dataclasses.asdict(self.slo)
        if self.cache_off:
            out["cache_off"] = dict(self.cache_off)
        if self.launch is not None:
            out.pop("base_url", None)
            if self.launch.name:
                out["server"] = self.launch.name
            if self.launch.args:
                out["server_args"] = dict(self.launch.args)
        return out


@dataclasses.dataclass(frozen=True)
class CaseSpec:
    """One fully expanded case: what the runner measures."""

    case_id: str
    engine: str
    mode: str
    params: dict  # mode options, e.g. {"mask": "segment"}
    model: str
    dtype: str
    tp: int
    workload: WorkloadSpec
    runs: RunsRecord  # max_rss enforced on engine workers; processes: fresh workers
    index: int  # position of the source line in `cases`
    http: HttpPlan | None = None  # an `engine: http` case's server and load
    # the id's parts besides engine, mode and tp: (before tp=N, after it): keys.case_id
    id_parts: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    @property
    def engine_key(self) -> EngineKey:
        """(engine, model, dtype, tp), and the server its kind names (an http case's:
        HttpPlan.server)."""
        return EngineKey(self.engine, self.model, self.dtype, self.tp,
                         kind_of(self.engine).server(self))

    def id_at(self, key: EngineKey) -> str:
        """This case's id for another engine key (the same case at tp 1:
        `engine_key.at_tp1()`)."""
        return case_id(key, self.mode, *self.id_parts)

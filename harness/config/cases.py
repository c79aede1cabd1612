"""What one expanded case is (`CaseSpec`, with its `RunPlan` and, for an http case, its
`HttpPlan`): plain frozen dataclasses that the runner sends to engine workers.

This module imports nothing of `mibench.engines`: a worker of `mibench ab` runs another
revision's engines under this harness, and unpickling a case must not depend on names
those engines may lack (harness/ab/revisions.py probes what a worker imports).
"""

from __future__ import annotations

import dataclasses

from mibench.workloads import WorkloadSpec


@dataclasses.dataclass(frozen=True)
class RunPlan:
    warmup: int
    timed: int
    timeout_s: float | None = None
    max_rss: int | None = None  # bytes; enforced on engine workers
    processes: int = 1  # fresh workers that each measure the case


@dataclasses.dataclass(frozen=True)
class HttpPlan:
    """An `engine: http` case's server and load (docs/configs.md): `clients` requests in
    flight (closed loop) or Poisson arrivals at `rate` requests/s (open loop, seeded by the
    workload's seed); `warmup_requests` untimed, then `requests` measured; the case fails
    when more than `max_error_rate` of them fail. Each request gets its own workload (the
    workload's seed + the request's index) unless `same_query`."""

    base_url: str
    served_model: str | None = None
    timeout_s: float = 60.0
    clients: int | None = None
    rate: float | None = None
    requests: int = 100
    warmup_requests: int = 1
    max_error_rate: float = 0.0
    same_query: bool = False

    @property
    def server(self) -> tuple:
        """What builds the http engine (load_engine's extra keywords), hashable."""
        return (("base_url", self.base_url), ("served_model", self.served_model),
                ("timeout_s", self.timeout_s))

    def as_dict(self) -> dict:
        """The case keys this plan differs from the defaults in (a case's `params`: the
        reproduce commands rebuild its `cases` entry from them)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) != f.default}


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
    runs: RunPlan
    index: int  # position of the source line in `cases`
    http: HttpPlan | None = None  # an `engine: http` case's server and load

    @property
    def engine_key(self) -> tuple:
        """(engine, model, dtype, tp); an http case adds its server (HttpPlan.server)."""
        key = (self.engine, self.model, self.dtype, self.tp)
        return key if self.http is None else (*key, self.http.server)

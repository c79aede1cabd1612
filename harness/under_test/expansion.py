"""An http case's expansion (config/matrix.py asks it through the case kind's `plans` and
`runs`): its load plan per value of the load axis and per combination of the launched
server's arguments, with their case-id parts."""

from __future__ import annotations

import itertools

from mibench.workloads import WorkloadSpec

from ..config.cases import HttpPlan, SloPlan
from ..config.keys import short
from ..config.server import ServerLaunch
from ..config.spec import HTTP_FIELDS, Case, Config
from ..records.case import RunsRecord
from ..stats.capacity import min_samples


def runs(plan: RunsRecord, http: HttpPlan) -> RunsRecord:
    """An http case is one load (warmup_requests, requests), in one process; runs.warmup,
    timed and processes do not apply to it, its timeout_s and max_rss do. With `slo` its
    timed runs are the repeats at the rate found."""
    timed = http.slo.repeats if http.slo is not None else 1
    return plan.model_copy(update=dict(warmup=0, timed=timed, processes=1))


def plans(config: Config, i: int, case: Case,
                spec: WorkloadSpec) -> list[tuple[HttpPlan, tuple[str, ...]]]:
    """(plan, case-id parts) per value of the load axis (clients or rate). Ids: `clients=N`
    or `rate=R`, `same_query=true`, `served=NAME`."""
    set_ = {k: getattr(case, k) for k in HTTP_FIELDS if getattr(case, k) is not None
            and k not in ("clients", "rate", "launch", "server_args", "slo", "concurrency",
                          "cold_start", "prefix_cache")}
    set_ |= measures(case)
    if spec.tokens == "constant" and spec.requests is None and not case.same_query:
        raise config.error(("cases", i, "same_query") if case.same_query is not None else
                           ("cases", i, "engine"), "with tokens: constant every request is "
                           "the same; set same_query: true (one query on purpose) or use "
                           "tokens: random")
    tail = (("same_query=true",) if case.same_query else ()) + (
        (f"served={case.served_model}",) if case.served_model else ())
    if case.slo is not None:
        slo = slo_plan(case.slo)
        shapes = [({"slo": slo, "requests": slo.requests}, f"slo={slo.label()}")]
    elif case.clients is not None:
        shapes = [({"clients": n}, f"clients={n}") for n in case.clients]
    else:
        shapes = [({"rate": r}, f"rate={r:g}") for r in case.rate]
    out = []
    for launch, server_parts in launches(case):  # a server's cases together: started once
        for shape, part in shapes:  # how the requests are sent
            out.append((HttpPlan(launch=launch, **shape, **set_),
                        (*server_parts, part, *tail)))
    return out


def slo_plan(slo) -> SloPlan:
    """The config's `slo` section as the runner's plan, defaults filled."""
    percentile, budget = slo.budget()
    low, high = slo.rates()
    return SloPlan(percentile=percentile, budget_ms=budget, max_error_rate=slo.max_error_rate,
                   start_rate=slo.start_rate, min_rate=low, max_rate=high,
                   precision=slo.precision,
                   requests=slo.requests or min_samples(percentile), repeats=slo.repeats,
                   max_steps=slo.max_steps)


def measures(case: Case) -> dict:
    """The HttpPlan fields of the case's `concurrency`, `prefix_cache` and `cold_start`
    sections."""
    out = {}
    if case.prefix_cache is not None:
        p = case.prefix_cache
        out |= dict(prefix_trials=p.trials, prefix_max_fail_rate=p.max_fail_rate,
                    cache_off=tuple(p.cache_off.items()))
    if case.concurrency is not None:
        out |= dict(trials=case.concurrency.trials,
                    max_fail_rate=case.concurrency.max_fail_rate)
    if case.cold_start is not None:
        out |= dict(cold_starts=case.cold_start.launches,
                    warm_requests=case.cold_start.warm_requests)
    return out


def launches(case: Case) -> list[tuple[ServerLaunch | None, tuple[str, ...]]]:
    """(launch with one combination of the server arguments, its case-id parts) per
    combination; [(None, ())] for a server that is not launched. Ids: `server=NAME`, then
    each argument that is an axis (`max_running_requests=16`)."""
    if case.launch is None:
        return [(None, ())]
    lc = case.launch
    args = case.server_args or {}
    keys = list(args)
    out = []
    for values in itertools.product(*(args[k] for k in keys)):
        chosen = tuple(zip(keys, values, strict=True))
        parts = ((f"server={lc.name}",) if lc.name else ()) + tuple(
            f"{k}={short(v)}" for k, v in chosen if len(args[k]) > 1)
        out.append((ServerLaunch(lc, chosen), parts))
    return out

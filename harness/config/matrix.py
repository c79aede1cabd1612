"""Expand a config into its cases: every list-valued option is a matrix axis.

Order: model, dtype, tp (outer: one engine each, so an engine's cases run together), then
the config's cases in order, then each case's option axes, then workload axes.

Case ids are stable and readable: `engine/mode/opt=value.../tp=N`, then `model=`, `dtype=`,
`q=`, `items=`, `item_len=` for axes that the config varies (more than one value), then
`key=value` for each workload key a case patches. Two cases with the same id are an error.
An http case (`engine: http`) has its load after its mode: `clients=N` or `rate=R`, then
`same_query=true` and `served=NAME` when set.
"""

from __future__ import annotations

import fnmatch
import itertools

from mibench.engines import OPTIONS, MibenchError
from mibench.errors import closest_first
from mibench.workloads import WorkloadSpec

from ..records.case import RunsRecord
from ..stats.capacity import min_samples
from .cases import CaseSpec, HttpPlan, ServerLaunch, SloPlan
from .keys import EngineKey, case_id, id_part, model_name, short
from .spec import HTTP_FIELDS, Case, Config, Workload

WORKLOAD_AXES = {"query_tokens": "q", "num_items": "items", "item_tokens": "item_len"}


def _workload(config: Config, case: Case, i: int) -> Workload:
    try:
        return config.workload.patched(case.workload)
    except ValueError as e:
        raise config.error(("cases", i, "workload"), str(e)) from None


def _id_parts(case: Case, params: dict, axes: dict, config: Config, patch: dict,
              extra: tuple[str, ...] = ()) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The case id's parts (keys.case_id): before tp=N the mode options an id names and
    `extra` (the http load and server parts); after it the axes that vary."""
    options = tuple(id_part(k, v) for k, v in params.items() if OPTIONS[k].id_omits != v)
    tail = []
    m = config.model
    if len(m.path) > 1:
        tail.append(f"model={model_name(axes['model'])}")
    if len(m.dtype) > 1:
        tail.append(f"dtype={axes['dtype']}")
    w = config.workload
    for field, name in WORKLOAD_AXES.items():
        if name in axes and (len(getattr(w, field) or []) > 1 or field in patch):
            tail.append(id_part(name, axes[name]))
    tail += [f"{k}={model_name(v)}" if k == "requests" else id_part(k, v)
             for k, v in patch.items() if k not in WORKLOAD_AXES]
    return options + tuple(extra), tuple(tail)


def _expand_case(config: Config, i: int, case: Case, model: str, dtype: str,
                 tp: int) -> list[CaseSpec]:
    plan = config.runs.patched(case.runs)
    patch = case.workload.model_dump(exclude_unset=True) if case.workload else {}
    names = [o for o in OPTIONS if getattr(case, o) is not None]
    out = []
    for values in itertools.product(*(getattr(case, o) for o in names)):
        params = dict(zip(names, values, strict=True))
        for axes, spec in _workload(config, case, i).expand():
            axes = {**axes, "model": model, "dtype": dtype}
            for http, extra in _http_plans(config, i, case, spec):
                parts = _id_parts(case, params, axes, config, patch, extra)
                out.append(CaseSpec(case_id=case_id(EngineKey(case.engine, model, dtype, tp),
                                                    case.mode, *parts), id_parts=parts,
                                    engine=case.engine, mode=case.mode, params=params,
                                    model=model, dtype=dtype, tp=tp, workload=spec,
                                    runs=plan if http is None else _http_runs(plan, http),
                                    index=i,
                                    http=http))
    return out


def _http_runs(plan: RunsRecord, http: HttpPlan) -> RunsRecord:
    """An http case is one load (warmup_requests, requests), in one process; runs.warmup,
    timed and processes do not apply to it, its timeout_s and max_rss do. With `slo` its
    timed runs are the repeats at the rate found."""
    timed = http.slo.repeats if http.slo is not None else 1
    return plan.model_copy(update=dict(warmup=0, timed=timed, processes=1))


def _http_plans(config: Config, i: int, case: Case,
                spec: WorkloadSpec) -> list[tuple[HttpPlan | None, tuple[str, ...]]]:
    """(plan, case-id parts) per value of the load axis (clients or rate); one (None, ())
    for any other engine. Ids: `clients=N` or `rate=R`, `same_query=true`, `served=NAME`."""
    if case.engine != "http":
        return [(None, ())]
    set_ = {k: getattr(case, k) for k in HTTP_FIELDS if getattr(case, k) is not None
            and k not in ("clients", "rate", "launch", "server_args", "slo", "concurrency",
                          "cold_start", "prefix_cache")}
    set_ |= _measures(case)
    if spec.tokens == "constant" and spec.requests is None and not case.same_query:
        raise config.error(("cases", i, "same_query") if case.same_query is not None else
                           ("cases", i, "engine"), "with tokens: constant every request is "
                           "the same; set same_query: true (one query on purpose) or use "
                           "tokens: random")
    tail = (("same_query=true",) if case.same_query else ()) + (
        (f"served={case.served_model}",) if case.served_model else ())
    if case.slo is not None:
        slo = slo_plan(case.slo)
        loads = [({"slo": slo, "requests": slo.requests}, f"slo={slo.label()}")]
    elif case.clients is not None:
        loads = [({"clients": n}, f"clients={n}") for n in case.clients]
    else:
        loads = [({"rate": r}, f"rate={r:g}") for r in case.rate]
    out = []
    for launch, server_parts in _launches(case):  # a server's cases together: started once
        for load, part in loads:
            out.append((HttpPlan(launch=launch, **load, **set_),
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


def _measures(case: Case) -> dict:
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


def _launches(case: Case) -> list[tuple[ServerLaunch | None, tuple[str, ...]]]:
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


def expand(config: Config) -> list[CaseSpec]:
    """All cases of a config, in run order; raises ConfigError on a duplicate id. The config
    is one `load_config` checked (config/problems.py: engines, modes, options exist).
    Expanded once per config object (a frozen model) and kept."""
    if config._cases is None:
        config._cases = tuple(_expand(config))
    return list(config._cases)


def _expand(config: Config) -> list[CaseSpec]:
    cases: list[CaseSpec] = []
    seen: dict[str, int] = {}
    for model, dtype, tp in itertools.product(config.model.path, config.model.dtype,
                                              config.topology.tp):
        for i, case in enumerate(config.cases):
            for spec in _expand_case(config, i, case, model, dtype, tp):
                if spec.case_id in seen and seen[spec.case_id] != i:
                    raise config.error(("cases", i), f"case id {spec.case_id!r} repeats "
                                       f"cases.{seen[spec.case_id]}; make the cases differ")
                seen[spec.case_id] = i
                cases.append(spec)
    return cases


def select_cases(cases: list, patterns: list[str] | str | None, what: str = "the config"
                 ) -> list:
    """The cases whose `case_id` matches any of the globs (fnmatch; None or []: all of
    them), in their order; a glob that matches nothing is a MibenchError naming --case."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not patterns:
        return list(cases)
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(c.case_id, pattern) for c in cases):
            ids = list(dict.fromkeys(c.case_id for c in cases))
            raise MibenchError(f"{pattern!r} matches no case of {what}; its {len(ids)} "
                               f"case(s), the closest first: {closest_first(pattern, ids)}",
                               field="--case")
    return [c for c in cases if any(fnmatch.fnmatchcase(c.case_id, p) for p in patterns)]

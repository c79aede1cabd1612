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

from mibench.engines import MODES, OPTIONS, WIRES, MibenchError, parse_base_url
from mibench.harness.config.cases import CaseSpec, HttpPlan, ServerLaunch, SloPlan
from mibench.harness.config.spec import HTTP_FIELDS, Case, Config, Workload
from mibench.harness.records.case import RunsRecord
from mibench.harness.stats.capacity import min_samples
from mibench.workloads import WorkloadSpec

WORKLOAD_AXES = {"query_tokens": "q", "num_items": "items", "item_tokens": "item_len"}


def short(value) -> str:
    """Compact, readable rendering of an option value for case ids."""
    if isinstance(value, list | tuple):
        ints = all(isinstance(v, int) for v in value)
        if ints and len(value) > 2 and list(value) == list(range(value[0], value[-1] + 1)):
            return f"{value[0]}-{value[-1]}"  # 1,2,...,12 -> 1-12
        return ",".join(short(v) for v in value)
    if hasattr(value, "dist"):
        return f"{value.dist}{value.min}-{value.max}"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def model_name(path: str) -> str:
    return path.removeprefix("embedded:").rstrip("/").rsplit("/", 1)[-1]


def check_case(config: Config, i: int, case: Case) -> None:
    """Engine, mode and options must exist; errors name `cases.i.key`."""
    if case.engine not in MODES:
        raise config.error(("cases", i, "engine"),
                           f"unknown engine {case.engine!r} (known: {', '.join(MODES)})")
    modes = MODES[case.engine]
    if case.mode not in modes:
        raise config.error(("cases", i, "mode"), f"unknown mode {case.mode!r} for engine "
                           f"{case.engine} (known: {', '.join(modes)})")
    for opt in OPTIONS:
        if getattr(case, opt) is not None and opt not in modes[case.mode].options:
            allowed = ", ".join(modes[case.mode].options) or "none"
            raise config.error(("cases", i, opt), f"mode {case.mode} takes no option {opt!r} "
                               f"(its options: {allowed})")
    check_http(config, i, case)


def check_http(config: Config, i: int, case: Case) -> None:
    """The http keys: only on http cases; an http case has base_url (a URL) or launch (how
    mibench starts the server; server_args only with it), and one load shape, clients or
    rate."""
    given = [k for k in HTTP_FIELDS if getattr(case, k) is not None]
    if case.engine != "http":
        if given:
            raise config.error(("cases", i, given[0]), f"{given[0]} is a key of http cases "
                               f"(engine: http), not of engine {case.engine}")
        return
    if case.base_url is not None and case.launch is not None:
        raise config.error(("cases", i, "launch"), "give base_url (a server that is running) "
                           "or launch (mibench starts it on a free port), not both")
    if case.base_url is None and case.launch is None:
        raise config.error(("cases", i, "engine"), "an http case needs base_url: the "
                           "server's address, e.g. http://127.0.0.1:8000, or launch: how "
                           "mibench starts the server")
    if case.server_args is not None and case.launch is None:
        raise config.error(("cases", i, "server_args"), "server_args are the flags of a "
                           "server mibench launches: give launch too")
    if case.base_url is not None:
        try:
            parse_base_url(case.base_url)
        except MibenchError as e:
            raise config.error(("cases", i, "base_url"), str(e).removeprefix("base_url: ")) \
                from None
    if case.wire is not None and case.wire not in WIRES:
        raise config.error(("cases", i, "wire"), f"unknown wire {case.wire!r} (known: "
                           f"{', '.join(WIRES)})")
    if case.slo is not None:
        given = [k for k in ("clients", "rate", "requests") if getattr(case, k) is not None]
        if given:
            raise config.error(("cases", i, given[0]), f"{given[0]} is not used with slo: "
                               "the search picks the open-loop rates (slo.start_rate ... "
                               "max_rate) and slo.requests per step")
    elif (case.clients is None) == (case.rate is None):
        raise config.error(("cases", i, "rate" if case.rate is not None else "engine"),
                           "an http case takes clients: N (closed loop, N requests in "
                           "flight), rate: R (open loop, R requests/s) or slo (the highest "
                           "rate that meets a latency budget), "
                           + ("not both" if case.rate is not None else "one of them"))
    if case.cold_start is not None and case.launch is None:
        raise config.error(("cases", i, "cold_start"), "cold starts are fresh launches of "
                           "a server mibench starts: give launch too")


def _workload(config: Config, case: Case, i: int) -> Workload:
    try:
        return config.workload.patched(case.workload)
    except ValueError as e:
        raise config.error(("cases", i, "workload"), str(e)) from None


def workload_specs(w: Workload) -> list[tuple[dict, WorkloadSpec]]:
    """Expand a workload's axes: (axis values by short name, spec) per combination."""
    return w.expand()


def _case_id(case: Case, params: dict, tp: int, axes: dict, config: Config, patch: dict,
             extra: tuple[str, ...] = ()) -> str:
    parts = [case.engine, case.mode] + [f"{k}={short(v)}" for k, v in params.items()
                                        if OPTIONS[k].id_omits != v]
    parts += extra
    parts.append(f"tp={tp}")
    m = config.model
    if len(m.path) > 1:
        parts.append(f"model={model_name(axes['model'])}")
    if len(m.dtype) > 1:
        parts.append(f"dtype={axes['dtype']}")
    w = config.workload
    for field, name in WORKLOAD_AXES.items():
        if name in axes and (len(getattr(w, field) or []) > 1 or field in patch):
            parts.append(f"{name}={short(axes[name])}")
    parts += [f"{k}={model_name(v) if k == 'requests' else short(v)}" for k, v in patch.items()
              if k not in WORKLOAD_AXES]
    return "/".join(parts)


def _expand_case(config: Config, i: int, case: Case, model: str, dtype: str,
                 tp: int) -> list[CaseSpec]:
    plan = config.runs.patched(case.runs)
    patch = case.workload.model_dump(exclude_unset=True) if case.workload else {}
    names = [o for o in OPTIONS if getattr(case, o) is not None]
    out = []
    for values in itertools.product(*(getattr(case, o) for o in names)):
        params = dict(zip(names, values, strict=True))
        for axes, spec in workload_specs(_workload(config, case, i)):
            axes = {**axes, "model": model, "dtype": dtype}
            for http, extra in _http_plans(config, i, case, spec):
                out.append(CaseSpec(case_id=_case_id(case, params, tp, axes, config, patch,
                                                     extra),
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
                          "cold_start")}
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
    """The HttpPlan fields of the case's `concurrency` and `cold_start` sections."""
    out = {}
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


def check_reference(config: Config) -> None:
    ref = config.parity.reference if config.parity else None
    if ref is None:
        return
    if ref.engine not in MODES:
        raise config.error(("parity", "reference", "engine"), f"unknown engine {ref.engine!r} "
                           f"(known: {', '.join(MODES)})")
    if ref.mode not in MODES[ref.engine]:
        raise config.error(("parity", "reference", "mode"), f"unknown mode {ref.mode!r} for "
                           f"engine {ref.engine} (known: {', '.join(MODES[ref.engine])})")


def expand(config: Config) -> list[CaseSpec]:
    """All cases of a config, in run order; raises ConfigError on a bad case or duplicate id.
    Expanded once per config object (a frozen model) and kept."""
    if config._cases is None:
        config._cases = tuple(_expand(config))
    return list(config._cases)


def _expand(config: Config) -> list[CaseSpec]:
    for i, case in enumerate(config.cases):
        check_case(config, i, case)
    check_reference(config)
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
            known = ", ".join(c.case_id for c in cases[:5])
            raise MibenchError(f"{pattern!r} matches no case of {what} (its cases: {known}"
                               f"{', ...' if len(cases) > 5 else ''})", field="--case")
    return [c for c in cases if any(fnmatch.fnmatchcase(c.case_id, p) for p in patterns)]

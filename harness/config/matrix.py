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

from ..case_kinds import kind_of
from .cases import CaseSpec
from .keys import EngineKey, case_id, id_part, model_name
from .spec import Case, Config, Workload

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
    out, kind = [], kind_of(case.engine)
    for values in itertools.product(*(getattr(case, o) for o in names)):
        params = dict(zip(names, values, strict=True))
        for axes, spec in _workload(config, case, i).expand():
            axes = {**axes, "model": model, "dtype": dtype}
            for http, extra in kind.plans(config, i, case, spec):
                parts = _id_parts(case, params, axes, config, patch, extra)
                out.append(CaseSpec(case_id=case_id(EngineKey(case.engine, model, dtype, tp),
                                                    case.mode, *parts), id_parts=parts,
                                    engine=case.engine, mode=case.mode, params=params,
                                    model=model, dtype=dtype, tp=tp, workload=spec,
                                    runs=kind.runs(plan, http),
                                    index=i,
                                    http=http))
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

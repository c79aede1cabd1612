"""The one validation pass of a config: every rule on what it asks of its engines, its
models and this machine, each run once, found as `Problem`s (the key at fault, why) and
never raised here; `load_config` raises the first as a ConfigError naming `file:line: key`.
Pydantic (config/spec.py) checks the structure before. The mode rules are the registry's
(`Mode.problems`: semantics, a packing mode's delimiter, precompile_bs >= extend_batch_size)
and so is the memory estimate's check (`Mode.memory_fit`). No weights are generated or
loaded: each model's facts come from its preset or its `config.json` (`model_facts`).

- `config_problems`, before expanding: at most MAX_CASES cases; each case's engine, mode
  and options; the http keys; parity's reference, its `topologies` beside an http case and
  its `prefix_cache` with a case that says how to turn a server's cache off.
- `case_problems` (config/case_problems.py), on the expanded cases: models (a preset or a
  checkpoint folder); a launched server's folder and interpreter; the mode's rules; labels
  and delimiter inside the vocabulary; `query + delimiter + item` within the maximum
  length; the constant workload's tokens (1, 2) not the delimiter; a `requests:` file and
  each of its lines; a case's host memory within this machine's and HARD_LIMIT; the parity
  workload, the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

from mibench.engines import (
    OPTIONS,
    MibenchError,
    engine_mode,
)

from ..case_kinds import all_kinds, kind_of
from .case_problems import case_problems
from .matrix import CaseSpec
from .spec import Case, Config
from .yamlsource import Problem

MAX_CASES = 10_000


def problems(config: Config, cases: list[CaseSpec]) -> list[Problem]:
    """Every problem of `config` and its expansion `cases`, in the order they are
    reported (the first is the one `load_config` raises)."""
    return config_problems(config) + case_problems(config, cases)


def raise_first(config: Config, found: list[Problem]) -> None:
    """The first problem as a ConfigError naming `file:line: key` (none: nothing)."""
    if found:
        raise config.error(found[0].key, found[0].message)


# ---- the config itself, before it is expanded ---------------------------------------------


def config_problems(config: Config) -> list[Problem]:
    """The rules expansion relies on: a bounded matrix, engines, modes, options, http keys,
    parity's reference."""
    found = list(_count(config))
    for i, case in enumerate(config.cases):
        found += _case(config, i, case)
    return found + list(_reference(config))


def _count(config: Config) -> Iterator[Problem]:
    """Refuse a matrix of more than MAX_CASES cases before expanding it."""
    outer = len(config.model.path) * len(config.model.dtype) * len(config.topology.tp)
    total = 0
    for case in config.cases:
        n = 1
        for name in type(case).model_fields:
            value = getattr(case, name)
            if name not in ("engine", "mode", "runs", "workload") and isinstance(value, list):
                n *= len(value)
        patch = case.workload.model_dump(exclude_unset=True) if case.workload else {}
        w = config.workload
        if (patch.get("requests") or w.requests) is None or \
                any(k in patch for k in ("query_tokens", "num_items", "item_tokens")):
            for field in ("query_tokens", "num_items", "item_tokens"):
                n *= len(patch.get(field) or getattr(w, field) or [None])
        total += n
    total *= outer
    if total > MAX_CASES:
        yield Problem(("cases",), f"the matrix expands to {total} cases (model x dtype x "
                      f"tp x option and workload axes); at most {MAX_CASES}: split it")


def _case(config: Config, i: int, case: Case) -> list[Problem]:
    """Engine, mode and options must exist; then the keys each case kind owns."""
    try:
        mode = engine_mode(case.engine, case.mode)
    except MibenchError as e:  # names `engine` or `mode`
        return [Problem(("cases", i, e.field), e.message)]
    for opt in OPTIONS:
        if getattr(case, opt) is not None and opt not in mode.options:
            allowed = ", ".join(mode.options) or "none"
            return [Problem(("cases", i, opt), f"mode {case.mode} takes no option {opt!r} "
                            f"(its options: {allowed})")]
    return [p for kind in all_kinds() for p in kind.problems(i, case)]  # each its own keys


def _reference(config: Config) -> Iterator[Problem]:
    ref = config.parity.reference if config.parity else None
    if ref is not None:
        try:
            engine_mode(ref.engine, ref.mode)
        except MibenchError as e:  # names `engine` or `mode`
            yield Problem(("parity", "reference", e.field), e.message)
    checks = config.parity.checks if config.parity else []
    unsharded = [i for i, c in enumerate(config.cases) if not kind_of(c.engine).sharded]
    if "prefix_cache" in checks and not any(c.prefix_cache is not None for c in config.cases):
        yield Problem(("parity", "checks"), "prefix_cache checks the servers whose case says "
                      "how to turn their cache off (the control): give an http case "
                      "prefix_cache: {cache_off: {disable_radix_cache: true}} (its server's "
                      "flags), or leave prefix_cache out")
    if "topologies" in checks and unsharded and max(config.topology.tp) > 1:
        yield Problem(("parity", "checks"), "topologies compares mibench's own engines at "
                      "tp > 1 with tp 1; a server under test is not sharded by topology.tp "
                      f"(cases.{unsharded[0]} is {config.cases[unsharded[0]].engine}): leave "
                      "topologies out, or run the http "
                      "case from a config at tp 1")

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
    WIRES,
    MibenchError,
    engine_mode,
    parse_base_url,
)

from .case_problems import case_problems
from .matrix import CaseSpec
from .spec import HTTP_FIELDS, Case, Config
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
    """Engine, mode and options must exist; then the http keys."""
    try:
        mode = engine_mode(case.engine, case.mode)
    except MibenchError as e:  # names `engine` or `mode`
        return [Problem(("cases", i, e.field), e.message)]
    for opt in OPTIONS:
        if getattr(case, opt) is not None and opt not in mode.options:
            allowed = ", ".join(mode.options) or "none"
            return [Problem(("cases", i, opt), f"mode {case.mode} takes no option {opt!r} "
                            f"(its options: {allowed})")]
    return _http(i, case)


def _http(i: int, case: Case) -> list[Problem]:
    """The http keys: only on http cases; an http case has base_url (a URL) or launch (how
    mibench starts the server; server_args only with it), and one load shape, clients,
    rate or slo."""
    def at(key: str, message: str) -> list[Problem]:
        return [Problem(("cases", i, key), message)]

    given = [k for k in HTTP_FIELDS if getattr(case, k) is not None]
    if case.engine != "http":
        return at(given[0], f"{given[0]} is a key of http cases (engine: http), not of "
                  f"engine {case.engine}") if given else []
    if case.base_url is not None and case.launch is not None:
        return at("launch", "give base_url (a server that is running) or launch (mibench "
                  "starts it on a free port), not both")
    if case.base_url is None and case.launch is None:
        return at("engine", "an http case needs base_url: the server's address, e.g. "
                  "http://127.0.0.1:8000, or launch: how mibench starts the server")
    if case.server_args is not None and case.launch is None:
        return at("server_args", "server_args are the flags of a server mibench launches: "
                  "give launch too")
    if case.base_url is not None:
        try:
            parse_base_url(case.base_url)
        except MibenchError as e:
            return at("base_url", e.message)
    if case.wire is not None and case.wire not in WIRES:
        try:
            WIRES.lookup(case.wire)
        except MibenchError as e:  # the registry's one "unknown wire" message
            return at("wire", e.message)
    if case.slo is not None:
        given = [k for k in ("clients", "rate", "requests") if getattr(case, k) is not None]
        if given:
            return at(given[0], f"{given[0]} is not used with slo: the search picks the "
                      "open-loop rates (slo.start_rate ... max_rate) and slo.requests per "
                      "step")
    elif (case.clients is None) == (case.rate is None):
        return at("rate" if case.rate is not None else "engine", "an http case takes "
                  "clients: N (closed loop, N requests in flight), rate: R (open loop, R "
                  "requests/s) or slo (the highest rate that meets a latency budget), "
                  + ("not both" if case.rate is not None else "one of them"))
    if case.cold_start is not None and case.launch is None:
        return at("cold_start", "cold starts are fresh launches of a server mibench "
                  "starts: give launch too")
    if case.prefix_cache is not None and case.launch is None:
        return at("prefix_cache", "the prefix_cache check compares fresh launches of a "
                  "server mibench starts, cache on and off: give launch too")
    return []


def _reference(config: Config) -> Iterator[Problem]:
    ref = config.parity.reference if config.parity else None
    if ref is not None:
        try:
            engine_mode(ref.engine, ref.mode)
        except MibenchError as e:  # names `engine` or `mode`
            yield Problem(("parity", "reference", e.field), e.message)
    checks = config.parity.checks if config.parity else []
    http = [i for i, c in enumerate(config.cases) if c.engine == "http"]
    if "prefix_cache" in checks and not any(c.prefix_cache is not None for c in config.cases):
        yield Problem(("parity", "checks"), "prefix_cache checks the servers whose case says "
                      "how to turn their cache off (the control): give an http case "
                      "prefix_cache: {cache_off: {disable_radix_cache: true}} (its server's "
                      "flags), or leave prefix_cache out")
    if "topologies" in checks and http and max(config.topology.tp) > 1:
        yield Problem(("parity", "checks"), "topologies compares mibench's own engines at "
                      "tp > 1 with tp 1; a server under test is not sharded by topology.tp "
                      f"(cases.{http[0]} is http): leave topologies out, or run the http "
                      "case from a config at tp 1")

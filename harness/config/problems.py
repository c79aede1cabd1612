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
- `case_problems`, on the expanded cases: models (a preset or a checkpoint folder); a
  launched server's folder and interpreter; the mode's rules; labels and delimiter inside
  the vocabulary; `query + delimiter + item` within the maximum length; the constant
  workload's tokens (1, 2) not the delimiter; a `requests:` file and each of its lines; a
  case's host memory within this machine's and HARD_LIMIT; the parity workload, the same way.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from pathlib import Path

from mibench.engines import (
    HARD_LIMIT,
    MODES,
    OPTIONS,
    PART_OPTION,
    WIRES,
    MibenchError,
    Mode,
    Shape,
    TextBound,
    engine_mode,
    host_memory,
    model_facts,
    parse_base_url,
)
from mibench.workloads.jsonl import MAX_REQUESTS_BYTES, scan_requests

from ..util import gib
from .http_load import client_parts
from .matrix import CaseSpec
from .spec import HTTP_FIELDS, Case, Config
from .yamlsource import Key

MAX_CASES = 10_000
# a requests file: at least 2 bytes of JSON (`7,`) per token id, each held as a Python int
# in a list (56 bytes per token id, engines/modes/accounting.py)
FILE_BYTES = 28


@dataclasses.dataclass(frozen=True)
class Problem:
    """A rule a config breaks: the key path at fault and why (no file, no line: the
    config's locations name them when it is raised)."""

    key: Key
    message: str


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
        return at("wire", f"unknown wire {case.wire!r} (known: {', '.join(WIRES)})")
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


# ---- its cases, once expanded ---------------------------------------------------------------


def case_problems(config: Config, cases: list[CaseSpec],
                  memory: tuple[int | None, str] | None = None) -> list[Problem]:
    """The rules on the expanded cases and the parity workload (`memory`: this machine's,
    `host_memory()` when not given)."""
    memory = host_memory() if memory is None else memory
    facts, found = _models(config)
    scanned: set[tuple[str, str]] = set()  # (requests file, model): each read once
    for case in cases:
        if case.model not in facts:
            continue  # its model is the problem
        f, model, spec = facts[case.model], case.model, case.workload
        found += _launch(case)
        found += _mode(config, case)
        found += _ids(config, case, spec, f, model)
        found += _length(config, case, spec, f, model)
        too_big = _memory(config, case, memory)  # a requests file too big is not read
        found += too_big
        if spec.requests is not None and (spec.requests, model) not in scanned and not too_big:
            scanned.add((spec.requests, model))
            found += _requests(config, case, spec, f, model)
    return found + _parity(config, facts)


def _parity(config: Config, facts: dict) -> list[Problem]:
    if config.parity is None or config.parity.workload is None:
        return []
    try:
        parity = config.workload.patched(config.parity.workload)
    except ValueError as e:
        return [Problem(("parity", "workload"), str(e))]
    spec = parity.expand()[0][1]
    try:
        Mode.resolve_semantics(spec.semantics, spec.delimiter)
    except MibenchError as e:
        return [Problem(_where(config, None, "semantics", parity=True), e.message)]
    found = []
    for model, f in facts.items():
        found += _ids(config, None, spec, f, model, parity=True)
        found += _length(config, None, spec, f, model, parity=True)
        found += _requests(config, None, spec, f, model, parity=True)
    return found


def _axis_key(config: Config, base: Key, value) -> Key:
    """`base`, or `base + (j,)` when the value is element j of a located list there."""
    values = getattr(_section(config, base[:-1]), base[-1], None)
    if isinstance(values, list) and value in values and base + (values.index(value),) in \
            config._locations:
        return base + (values.index(value),)
    return base


def _section(config: Config, key: Key):
    node = config
    for part in key:
        node = node[part] if isinstance(part, int) else getattr(node, part)
    return node


def _where(config: Config, case: CaseSpec | None, field: str, parity: bool = False) -> Key:
    """The key that set a workload field: the case's patch, parity's, or the workload's."""
    if case is not None:
        patch = config.cases[case.index].workload
        if patch is not None and field in patch.model_fields_set:
            return ("cases", case.index, "workload", field)
    if parity and config.parity.workload is not None and \
            field in config.parity.workload.model_fields_set:
        return ("parity", "workload", field)
    return ("workload", field)


def _models(config: Config) -> tuple[dict, list[Problem]]:
    facts, found = {}, []
    for path in config.model.path:
        try:
            facts[path] = model_facts(path)
        except MibenchError as e:
            found.append(Problem(_axis_key(config, ("model", "path"), path),
                                 e.message if e.field == "model" else str(e)))
    return facts, found


def _launch(case: CaseSpec) -> list[Problem]:
    """A launched server's folder and interpreter exist here (a `$VARIABLE` interpreter that
    is not set skips the case at run time instead)."""
    launch = case.http.launch if case.http is not None else None
    if launch is None:
        return []
    if launch.cwd is not None and not Path(launch.cwd).is_dir():
        return [Problem(("cases", case.index, "launch", "cwd"),
                        f"{launch.cwd} is not a folder here (the server starts in it)")]
    python = launch.interpreter()
    if launch.python is not None and python is not None and shutil.which(python) is None:
        return [Problem(("cases", case.index, "launch", "python"),
                        f"{python} is not an executable file here")]
    return []


def _mode(config: Config, case: CaseSpec) -> list[Problem]:
    """The mode's rules (`Mode.problems`): a semantics or delimiter problem names the
    workload key that set it, an option's names the case's option."""
    mode = MODES[case.engine][case.mode]
    out = []
    for e in mode.problems(case.params, case.workload.semantics, case.workload.delimiter):
        if e.field in ("semantics", "delimiter"):
            out.append(Problem(_where(config, case, e.field),
                               f"{e.message} (cases.{case.index})"))
        else:
            out.append(Problem(("cases", case.index, e.field), e.message))
    return out


def _ids(config, case, spec, facts, model: str, parity: bool = False) -> list[Problem]:
    vocab, out = facts.vocab_size, []
    for k, label in enumerate(spec.label_token_ids):
        if label >= vocab:
            key = _where(config, case, "label_token_ids", parity)
            out.append(Problem(key + (k,) if key + (k,) in config._locations else key,
                               f"label {label} is outside the vocabulary [0, {vocab}) of "
                               f"{model}"))
    d = spec.delimiter
    if d is not None and d >= vocab:
        out.append(Problem(_where(config, case, "delimiter", parity),
                           f"{d} is outside the vocabulary [0, {vocab}) of {model}"))
    if d in (1, 2) and spec.tokens == "constant" and spec.requests is None:
        out.append(Problem(_where(config, case, "delimiter", parity),
                           f"{d} is a token of the constant workload (query 1s, items 2s); "
                           "pick another delimiter or tokens: random"))
    return out


def _delimited(spec) -> bool:
    """Whether items follow `query d` (delimited semantics, set or derived)."""
    return spec.delimiter is not None and spec.semantics != "plain"


def _length(config, case, spec, facts, model: str, parity: bool = False) -> list[Problem]:
    if spec.requests is not None:
        return []
    longest = getattr(spec.item_tokens, "max", spec.item_tokens)
    total = spec.query_tokens + _delimited(spec) + longest
    if total <= facts.max_position_embeddings:
        return []
    key = _where(config, case, "query_tokens", parity)
    return [Problem(_axis_key(config, key, spec.query_tokens),
                    f"query ({spec.query_tokens}) + delimiter + item ({longest}) is "
                    f"{total} tokens, longer than the maximum of {model} "
                    f"({facts.max_position_embeddings})")]


def _requests(config, case, spec, facts, model: str, parity: bool = False) -> list[Problem]:
    """A requests file: it exists, every line is a request, ids inside the vocabulary,
    lengths within the model's maximum, the delimiter nowhere (its first problem)."""
    if spec.requests is None:
        return []
    key = _where(config, case, "requests", parity)
    try:
        requests = scan_requests(spec.requests)
    except MibenchError as e:
        return [Problem(key, str(e))]
    d, vocab, limit = spec.delimiter, facts.vocab_size, facts.max_position_embeddings
    bound = TextBound(model, limit)  # text: its characters, then its tokens (as `run`)
    for where, req in requests:
        seqs = [("query", req.query)] + [(f"items[{i}]", it) for i, it in enumerate(req.items)]
        for name, ids in seqs:
            if isinstance(ids, str):
                try:
                    bound.check_chars(ids)  # before any tokenizing
                except MibenchError as e:
                    return [Problem(key, f"{where} {name}: {e.message}")]
                continue
            bad = [t for t in ids if t >= vocab]
            if bad:
                return [Problem(key, f"{where} {name}: token id {bad[0]} is outside the "
                                f"vocabulary [0, {vocab}) of {model}")]
            if d is not None and d in ids:
                return [Problem(key, f"{where} {name}: holds the delimiter {d}")]
        try:
            total = _tokens(req, _delimited(spec), bound)
        except MibenchError as e:
            return [Problem(key, f"{where} {e.field}: {e.message}")]
        if total > limit:
            return [Problem(key, f"{where}: query + delimiter + item is {total} tokens, "
                            f"longer than the maximum of {model} ({limit})")]
    return []


def _tokens(req, delimited: bool, bound) -> int:
    """Tokens of the request's query, delimiter and longest item: token ids counted, text
    tokenized (bounded: `bound`) only where its UTF-8 bytes (+1 for a tokenizer's leading
    token, the most a byte-level tokenizer makes) could pass the model's positions."""
    seqs = [("query", req.query)] + [(f"items[{i}]", it) for i, it in enumerate(req.items)]
    most = {name: len(x.encode("utf-8")) + 1 if isinstance(x, str) else len(x)
            for name, x in seqs}
    upper = most["query"] + delimited + max(most[n] for n, _ in seqs[1:])
    if upper <= bound.positions:
        return upper  # fits for certain: nothing to tokenize
    n = {}
    for name, x in seqs:
        try:
            n[name] = len(bound(x)) if isinstance(x, str) else len(x)
        except MibenchError as e:
            raise e.under(name) from None
    return n["query"] + delimited + max(n[name] for name, _ in seqs[1:])


def _memory(config: Config, case: CaseSpec, memory: tuple[int | None, str]) -> list[Problem]:
    """The host memory of the case's requests (`Mode.memory_fit`; a requests file: its
    size as token lists) fits this machine and HARD_LIMIT; the problem names the key that
    decides the largest part (the workload's size, or the mode option behind a dense mask)."""
    spec, mode = case.workload, MODES[case.engine][case.mode]
    # the load generator's bodies and answers count toward the case's memory
    extra = client_parts(spec, case.http) if case.http is not None else {}
    ram, source = memory
    limit, what = (ram, f"this machine's {gib(ram)} of {source}") if ram else (None, "")
    if limit is None or HARD_LIMIT < limit:
        limit, what = HARD_LIMIT, f"the limit of {gib(HARD_LIMIT)}"
    if spec.requests is not None:
        try:
            size = Path(spec.requests).stat().st_size
        except OSError:
            return []  # _requests names it
        if size > MAX_REQUESTS_BYTES:
            return []  # _requests names the file's own bound, from its size
        shape, extra = None, {"token lists": size * FILE_BYTES, **extra}
        key = _where(config, case, "requests")
    else:
        it = spec.item_tokens
        mean, longest = ((it.min + it.max) / 2, it.max) if hasattr(it, "max") else (it, it)
        shape = Shape(spec.query_tokens + (spec.delimiter is not None), spec.num_items, mean,
                      longest=longest)
        key = _axis_key(config, _where(config, case, "num_items"), spec.num_items)
    parts, fits = mode.memory_fit(shape, case.params, limit, extra)
    if fits:
        return []
    host = {k: v for k, v in parts.items() if k not in extra}
    part = max(host, key=host.get) if host else "token lists"
    if part != "token lists":
        option = PART_OPTION.get(part)
        key = ("cases", case.index, option if option in case.params else "mode")
    shown = ", ".join(f"{name} {gib(n)}" for name, n in parts.items())
    return [Problem(key, f"case {case.case_id} needs at least {gib(sum(parts.values()))} of "
                    f"host memory ({shown}), more than {what}")]

"""What a config asks of its models and of this machine, checked when it loads (so
`mibench validate` finds it, not a failed case at run time), without generating or loading
any weights: each model's facts come from its preset or its `config.json`
(`mibench.engines.model_facts`).

- the matrix expands to at most MAX_CASES cases (counted before anything is expanded);
- every model is a known preset or a checkpoint folder;
- labels and the delimiter lie inside each model's vocabulary; `query + delimiter + item`
  fits its maximum length; the constant workload's tokens (1 and 2) are not the delimiter;
  a mode that packs items has a delimiter (its separator, under plain semantics too);
  `semantics: delimited` has a delimiter;
- `precompile_bs` holds `extend_batch_size` (its largest size is at least it);
- a `requests:` file exists and every line is a valid request (ids inside the vocabulary,
  short enough, without the delimiter);
- the host memory a case needs (its token lists, the dense mask of `packed`/`chunked`)
  fits this machine's RAM (`host_memory`) and HARD_LIMIT.

Every failure is a ConfigError naming `file:line: key`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mibench.engines import MODES, PART_OPTION, MibenchError, Mode, Shape, model_facts
from mibench.harness.config.matrix import CaseSpec, workload_specs
from mibench.harness.config.spec import Config, Workload
from mibench.harness.config.yamlsource import Key
from mibench.harness.util import gib
from mibench.workloads.jsonl import scan_requests

MAX_CASES = 10_000
# a requests file: at least 2 bytes of JSON (`7,`) per token id, each held as a Python int
# in a list (56 bytes per token id, engines/modes/accounting.py)
FILE_BYTES = 28
HARD_LIMIT = 1024**4  # 1 TiB: refused whatever the machine


def host_memory() -> tuple[int | None, str]:
    """(bytes, where they come from): the smaller of the RAM (/proc/meminfo MemTotal, else
    sysconf) and a cgroup memory limit; None when neither is known."""
    found: list[tuple[int, str]] = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                found.append((int(line.split()[1]) * 1024, "RAM (MemTotal)"))
                break
    except (OSError, ValueError, IndexError):
        pass
    if not found:
        try:
            found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "RAM"))
        except (ValueError, OSError, AttributeError):
            pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            found.append((int(limit), "cgroup memory.max"))
    except OSError:
        pass
    return min(found) if found else (None, "unknown")


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


def _message(e: MibenchError) -> str:
    text = str(e)
    return text.removeprefix("model: ") if e.field == "model" else text


def count_cases(config: Config) -> None:
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
        raise config.error(("cases",), f"the matrix expands to {total} cases (model x dtype x "
                           f"tp x option and workload axes); at most {MAX_CASES}: split it")


def _models(config: Config) -> dict:
    facts = {}
    for path in config.model.path:
        try:
            facts[path] = model_facts(path)
        except MibenchError as e:
            raise config.error(_axis_key(config, ("model", "path"), path),
                               _message(e)) from None
    return facts


def _check_ids(config, case, spec, facts, model: str, parity: bool = False) -> None:
    vocab = facts.vocab_size
    for k, label in enumerate(spec.label_token_ids):
        if label >= vocab:
            key = _where(config, case, "label_token_ids", parity)
            raise config.error(key + (k,) if key + (k,) in config._locations else key,
                               f"label {label} is outside the vocabulary [0, {vocab}) of "
                               f"{model}")
    d = spec.delimiter
    if d is not None and d >= vocab:
        raise config.error(_where(config, case, "delimiter", parity),
                           f"{d} is outside the vocabulary [0, {vocab}) of {model}")
    if d in (1, 2) and spec.tokens == "constant" and spec.requests is None:
        raise config.error(_where(config, case, "delimiter", parity),
                           f"{d} is a token of the constant workload (query 1s, items 2s); "
                           "pick another delimiter or tokens: random")


def _delimited(spec) -> bool:
    """Whether items follow `query d` (delimited semantics, set or derived)."""
    return spec.delimiter is not None and spec.semantics != "plain"


def _check_length(config, case, spec, facts, model: str, parity: bool = False) -> None:
    if spec.requests is not None:
        return
    longest = getattr(spec.item_tokens, "max", spec.item_tokens)
    total = spec.query_tokens + _delimited(spec) + longest
    if total > facts.max_position_embeddings:
        key = _where(config, case, "query_tokens", parity)
        raise config.error(_axis_key(config, key, spec.query_tokens),
                           f"query ({spec.query_tokens}) + delimiter + item ({longest}) is "
                           f"{total} tokens, longer than the maximum of {model} "
                           f"({facts.max_position_embeddings})")


def _check_requests(config, case, spec, facts, model: str, parity: bool = False) -> None:
    """A requests file: it exists, every line is a request, ids inside the vocabulary,
    lengths within the model's maximum, the delimiter nowhere."""
    if spec.requests is None:
        return
    key = _where(config, case, "requests", parity)
    try:
        requests = scan_requests(spec.requests)
    except MibenchError as e:
        raise config.error(key, str(e)) from None
    d, vocab, limit = spec.delimiter, facts.vocab_size, facts.max_position_embeddings
    for where, req in requests:
        seqs = [("query", req.query)] + [(f"items[{i}]", it) for i, it in enumerate(req.items)]
        for name, ids in seqs:
            if isinstance(ids, str):
                continue  # text: tokenized at run time
            bad = [t for t in ids if t >= vocab]
            if bad:
                raise config.error(key, f"{where} {name}: token id {bad[0]} is outside the "
                                   f"vocabulary [0, {vocab}) of {model}")
            if d is not None and d in ids:
                raise config.error(key, f"{where} {name}: holds the delimiter {d}")
        if not isinstance(req.query, str) and not isinstance(req.items[0], str):
            longest = max(len(it) for it in req.items)
            total = len(req.query) + _delimited(spec) + longest
            if total > limit:
                raise config.error(key, f"{where}: query + delimiter + item is {total} tokens, "
                                   f"longer than the maximum of {model} ({limit})")


def _check_memory(config: Config, case: CaseSpec, memory: tuple[int | None, str]) -> None:
    """The host memory of the case's requests (`Mode.host_bytes`; a requests file: its size
    as token lists) fits this machine and HARD_LIMIT; the error names the key that decides
    the largest part (the workload's size, or the mode option behind a dense mask ...)."""
    spec, mode = case.workload, MODES[case.engine][case.mode]
    if spec.requests is not None:
        try:
            size = Path(spec.requests).stat().st_size
        except OSError:
            return  # _check_requests names it
        parts = {"token lists": size * FILE_BYTES}
        key = _where(config, case, "requests")
    else:
        it = spec.item_tokens
        mean, longest = ((it.min + it.max) / 2, it.max) if hasattr(it, "max") else (it, it)
        prefix = spec.query_tokens + (spec.delimiter is not None)
        parts = mode.host_bytes(Shape(prefix, spec.num_items, mean, longest=longest),
                                case.params)
        key = _axis_key(config, _where(config, case, "num_items"), spec.num_items)
        part = max(parts, key=parts.get)
        if part != "token lists":
            option = PART_OPTION.get(part)
            key = ("cases", case.index, option if option in case.params else "mode")
    if case.http is not None:  # the load generator's side (harness/run/http_feed.py)
        parts = {**parts, **_client_parts(case)}
    need = sum(parts.values())
    ram, source = memory
    limit, what = (ram, f"this machine's {gib(ram)} of {source}") if ram else (None, "")
    if limit is None or HARD_LIMIT < limit:
        limit, what = HARD_LIMIT, f"the limit of {gib(HARD_LIMIT)}"
    if need > limit:
        shown = ", ".join(f"{name} {gib(n)}" for name, n in parts.items())
        raise config.error(key, f"case {case.case_id} needs at least {gib(need)} of host "
                           f"memory ({shown}), more than {what}")


def _client_parts(case: CaseSpec) -> dict[str, float]:
    """What an http case's load generator holds (http_feed.client_bytes)."""
    from mibench.harness.config.http_load import MAX_IN_FLIGHT, client_bytes

    spec, plan = case.workload, case.http
    if spec.requests is not None:  # the bodies are the file's requests: its token lists
        tokens, items = 0, 0
    else:
        it = spec.item_tokens
        mean = (it.min + it.max) / 2 if hasattr(it, "max") else it
        tokens, items = int(spec.query_tokens + spec.num_items * mean), spec.num_items
    in_flight = plan.clients if plan.clients is not None else MAX_IN_FLIGHT
    return client_bytes(plan.requests + plan.warmup_requests, min(in_flight, plan.requests),
                        tokens, items)


def _check_mode(config: Config, case: CaseSpec) -> None:
    mode = MODES[case.engine][case.mode]
    try:
        mode.check_semantics(case.workload.semantics, case.workload.delimiter)
    except MibenchError as e:  # names `semantics` or `delimiter`
        why = str(e).removeprefix(f"{e.field}: ")
        raise config.error(_where(config, case, e.field), f"{why} (cases.{case.index})") \
            from None
    if "precompile_bs" in mode.defaults and case.params.get("precompile_bs"):
        b = case.params.get("extend_batch_size") or mode.defaults.get("extend_batch_size")
        sizes = case.params["precompile_bs"]
        if b and max(sizes) < b:
            raise config.error(("cases", case.index, "precompile_bs"),
                               f"{sorted(sizes)} cannot hold extend_batch_size={b}: its "
                               f"largest size must be >= {b}")


def parity_workload(config: Config) -> Workload | None:
    """The parity workload (parity.workload over the workload), validated."""
    if config.parity is None or config.parity.workload is None:
        return None
    try:
        return config.workload.patched(config.parity.workload)
    except ValueError as e:
        raise config.error(("parity", "workload"), str(e)) from None


def _check_launch(config: Config, case: CaseSpec) -> None:
    """A launched server's folder and interpreter exist here (a `$VARIABLE` interpreter that
    is not set skips the case at run time instead)."""
    launch = case.http.launch if case.http is not None else None
    if launch is None:
        return
    if launch.cwd is not None and not Path(launch.cwd).is_dir():
        raise config.error(("cases", case.index, "launch", "cwd"),
                           f"{launch.cwd} is not a folder here (the server starts in it)")
    python = launch.interpreter()
    if launch.python is not None and python is not None and shutil.which(python) is None:
        raise config.error(("cases", case.index, "launch", "python"),
                           f"{python} is not an executable file here")


def check_config(config: Config, cases: list[CaseSpec]) -> None:
    """Every check above, in order; raises the first ConfigError."""
    facts = _models(config)
    memory = host_memory()
    scanned: set[tuple[str, str]] = set()  # (requests file, model): each read once
    for case in cases:
        f, model = facts[case.model], case.model
        _check_launch(config, case)
        _check_mode(config, case)
        _check_ids(config, case, case.workload, f, model)
        _check_length(config, case, case.workload, f, model)
        _check_memory(config, case, memory)
        if case.workload.requests is not None and (case.workload.requests, model) not in \
                scanned:
            scanned.add((case.workload.requests, model))
            _check_requests(config, case, case.workload, f, model)
    parity = parity_workload(config)
    if parity is not None:
        spec = workload_specs(parity)[0][1]
        try:
            Mode.resolve_semantics(spec.semantics, spec.delimiter)
        except MibenchError as e:
            raise config.error(_where(config, None, "semantics", parity=True),
                               str(e).removeprefix("semantics: ")) from None
        for model, f in facts.items():
            _check_ids(config, None, spec, f, model, parity=True)
            _check_length(config, None, spec, f, model, parity=True)
            _check_requests(config, None, spec, f, model, parity=True)

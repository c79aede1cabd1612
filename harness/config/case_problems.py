"""The rules on a config's cases once expanded (config/problems.py's `case_problems`, the
second half of the one validation pass): models (a preset or a checkpoint folder); a
launched server's folder and interpreter; the mode's rules; labels and delimiter inside the
vocabulary; `query + delimiter + item` within the maximum length; the constant workload's
tokens (1, 2) not the delimiter; a `requests:` file and each of its lines; a case's host
memory within this machine's and HARD_LIMIT; the parity workload, the same way."""

from __future__ import annotations

from pathlib import Path

from mibench.engines import (
    HARD_LIMIT,
    MODES,
    PART_OPTION,
    MibenchError,
    Mode,
    Shape,
    TextBound,
    host_memory,
    model_facts,
)
from mibench.workloads.jsonl import MAX_REQUESTS_BYTES, scan_requests

from ..case_kinds import kind_of
from ..util import gib
from .matrix import CaseSpec
from .spec import Config
from .yamlsource import Key, Problem

# a requests file: at least 2 bytes of JSON (`7,`) per token id, each held as a Python int
# in a list (56 bytes per token id, engines/modes/accounting.py)
FILE_BYTES = 28


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
        found += kind_of(case.engine).host_problems(case)
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
    extra = kind_of(case.engine).client_memory(case)
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

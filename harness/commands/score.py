"""`mibench score`: one request scored from the command line, JSON out. Token ids and text
are separate flags, so a typo in an id list is an error, not text; everything that can be
checked without the model's weights is checked before they load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from mibench.engines import SEMANTICS
from mibench.errors import MibenchError
from mibench.files import read_bounded

from .common import (
    DtypeName,
    EngineName,
    ModeName,
    choices,
    guarded,
    parse_options,
)


@guarded
def score(
    query_ids: Annotated[str | None, typer.Option(help="Query token ids: 1,2,3.")] = None,
    query_text: Annotated[str | None, typer.Option(
        help="Query text (the model's tokenizer).")] = None,
    item_ids: Annotated[list[str] | None, typer.Option(
        help="One item's token ids: 4,5 (repeat per item).")] = None,
    item_text: Annotated[list[str] | None, typer.Option(
        help="One item's text (repeat per item; not mixed with --item-ids).")] = None,
    request: Annotated[Path | None, typer.Option(
        help='JSON file {"query": ..., "items": ...}: query a list of token ids or a string, '
             'items a list of id lists or a list of strings.')] = None,
    labels: Annotated[str, typer.Option(help="Label token ids, e.g. 198,9834.")] = "198",
    model: str = "embedded:tiny", engine: EngineName = "jax", mode: ModeName = "single",
    dtype: DtypeName = "float32", tp: int = 1,
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    semantics: Annotated[str | None, typer.Option(
        metavar=choices(SEMANTICS),
        help="delimited (items after query + delimiter) or plain (after the query); "
             "default: delimited with --delimiter, else plain.")] = None,
    softmax: Annotated[bool, typer.Option(help="Softmax over the labels only.")] = False,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
):
    """Score one request; JSON scores on stdout."""
    result = score_request(query_ids=query_ids, query_text=query_text, item_ids=item_ids,
                           item_text=item_text, request=request, labels=labels,
                           model=model, engine=engine, mode=mode, dtype=dtype, tp=tp,
                           delimiter=delimiter, softmax=softmax, options=option or [],
                           semantics=semantics)
    print(json.dumps(result))


MAX_REQUEST_BYTES = 64 * 1024**2
MAX_ID_DIGITS = 12


def parse_ids(text: str, flag: str, text_flag: str | None = None) -> list[int]:
    """`1,2,3` (or `[1, 2, 3]`) as token ids; anything else is a MibenchError naming
    `flag` (`1,,2`, `1.5`, `1,2,`, `-3`, `abc`), never silently text."""
    body = text.strip()
    if body.startswith("[") and body.endswith("]"):
        body = body[1:-1].strip()
    hint = f"; text goes in {text_flag}" if text_flag else ""
    if not body:
        raise MibenchError(f"is empty: expected token ids like 1,2,3{hint}", field=flag)
    ids = []
    for j, part in enumerate(body.split(",")):
        part = part.strip()
        if not part:
            raise MibenchError(f"{text!r} has an empty id at position {j}: expected token ids "
                               f"like 1,2,3{hint}", field=flag)
        if not (part.isascii() and part.isdigit()) or len(part) > MAX_ID_DIGITS:
            raise MibenchError(f"{part!r} (position {j}) is not a token id (an integer >= 0):"
                               f" expected ids like 1,2,3{hint}", field=flag)
        ids.append(int(part))
    return ids


def read_request_file(path: Path) -> tuple:
    """(query, items) of a JSON request file, validated (workloads.request.RequestModel)."""
    from mibench.workloads.request import parse_request

    where = f"--request {path}"
    path = Path(path)
    try:
        data = json.loads(read_bounded(path, MAX_REQUEST_BYTES, "file", field=where))
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        if isinstance(e, MibenchError):
            raise
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise MibenchError(f"not JSON: {first}", field=where) from None
    req = parse_request(data, where)
    return req.query, list(req.items)


def _request(query_ids, query_text, item_ids, item_text, request: Path | None) -> tuple:
    """(query, items) from exactly one source: --request FILE, or a --query-* flag and
    --item-* flags (token ids and text are separate flags; items are not mixed)."""
    flags = [f for f, v in (("--query-ids", query_ids), ("--query-text", query_text),
                            ("--item-ids", item_ids), ("--item-text", item_text)) if v]
    if request is not None:
        if flags:
            raise MibenchError(f"give --request FILE or {flags[0]}, not both", field="--request")
        return read_request_file(request)
    if query_ids is not None and query_text is not None:
        raise MibenchError("give --query-ids or --query-text, not both", field="--query-text")
    if query_ids is None and query_text is None:
        raise MibenchError("missing: give --query-ids 1,2,3 or --query-text TEXT (or "
                           "--request FILE)", field="--query-ids")
    if item_ids and item_text:
        raise MibenchError("items are all token ids (--item-ids) or all text (--item-text), "
                           "not mixed", field="--item-text")
    if not item_ids and not item_text:
        raise MibenchError("missing: give at least one --item-ids 4,5 or --item-text TEXT",
                           field="--item-ids")
    if query_ids is not None:
        query = parse_ids(query_ids, "--query-ids", "--query-text")
    elif not query_text:
        raise MibenchError("is empty", field="--query-text")
    else:
        query = _text(query_text, "--query-text")
    if item_ids:
        items = [parse_ids(i, "--item-ids", "--item-text") for i in item_ids]
    else:
        empty = [n for n, t in enumerate(item_text) if not t]
        if empty:
            raise MibenchError(f"item {empty[0]} is empty", field="--item-text")
        items = [_text(t, "--item-text", n) for n, t in enumerate(item_text)]
    return query, items


def _text(text: str, flag: str, n: int | None = None) -> str:
    """Text of a flag, which must be UTF-8 (a byte that is not reaches Python as a lone
    surrogate); else a MibenchError naming the flag (and the item)."""
    from mibench.checks import text_problem

    problem = text_problem(text, from_argv=True)
    if problem:
        raise MibenchError(problem if n is None else f"item {n} {problem}", field=flag)
    return text


def score_request(*, query_ids=None, query_text=None, item_ids=None, item_text=None,
                  request=None, labels: str, model: str, engine: str, mode: str, dtype: str,
                  tp: int, delimiter, softmax: bool, options: list[str],
                  semantics: str | None = None) -> dict:
    """Score one request given on the command line. Everything that can be checked
    without the model's weights is checked before they load: the request, the labels,
    the engine, mode and options, the model (a known preset or a checkpoint folder)."""
    from mibench.engines import engine_mode, load_engine, model_facts

    q, its = _request(query_ids, query_text, item_ids, item_text, request)
    label_ids = parse_ids(labels, "--labels")
    opts = parse_options(options)
    try:
        m = engine_mode(engine, mode)
    except MibenchError as e:  # names `engine` or `mode`
        raise e.under(f"--{e.field}") from None
    try:
        m.check(opts)
    except MibenchError as e:
        raise MibenchError(str(e), field="--option") from None
    try:
        m.check_semantics(semantics, delimiter)
    except MibenchError as e:  # names `semantics`, or `delimiter` for a packing mode
        raise e.under(f"--{e.field}", MibenchError) from None
    facts = model_facts(model)
    _check_memory(m, opts, q, its, delimiter, facts, dtype)
    eng = load_engine(engine, model=model, dtype=dtype, tp=tp)
    extra = {} if semantics is None else {"semantics": semantics}
    result = eng.score(q, its, label_ids, mode=mode, apply_softmax=softmax,
                       delimiter=delimiter, **extra, **opts)
    return {"engine": engine, "model": model, "mode": mode, "dtype": dtype,
            "num_tokens": result.num_tokens, "scores": result.scores}


def _check_memory(mode, opts: dict, query, items, delimiter, facts=None,
                  dtype: str = "float32") -> None:
    """Refuse a request whose memory (`Mode.host_bytes` with the model's facts: the host
    parts and the device working set, which on a CPU is host memory too; text counted a
    token a byte, the most a byte-level tokenizer makes) is more than this machine has."""
    from mibench.engines import HARD_LIMIT, Shape, host_memory

    from ..util import gib

    def length(x) -> int:
        return len(x.encode("utf-8", "surrogatepass")) if isinstance(x, str) else len(x)

    prefix = length(query) + (delimiter is not None)
    lengths = [length(i) for i in items]
    shape = Shape(prefix, len(items), sum(lengths) / len(items), longest=max(lengths),
                  model=facts, dtype=dtype)
    ram, source = host_memory()
    limit = min(ram or HARD_LIMIT, HARD_LIMIT)
    parts, fits = mode.memory_fit(shape, opts, limit)
    if not fits:
        shown = ", ".join(f"{name} {gib(n)}" for name, n in parts.items())
        raise MibenchError(f"needs at least {gib(sum(parts.values()))} of host memory "
                           f"({shown}), more than {gib(limit)} ({source})", field="--mode")



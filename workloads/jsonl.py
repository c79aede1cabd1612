"""Requests from a JSONL file: one object a line, `{"query": ..., "items": [...]}`.

`query` and each item are either a string (tokenized with the model's tokenizer, without
special tokens) or a list of token ids. Blank lines and lines starting with `#` are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError
from mibench.workloads.request import Request


def _ids(value, where: str, tokenize) -> tuple[int, ...]:
    if isinstance(value, str):
        try:
            if tokenize is None:
                raise MibenchError("the model has no tokenizer")
            return tuple(int(t) for t in tokenize(value))
        except MibenchError as e:
            raise MibenchError(f"text request, but {e}", field=where) from None
    if isinstance(value, list) and all(isinstance(t, int) and not isinstance(t, bool)
                                       for t in value):
        return tuple(value)
    raise MibenchError("must be a string or a list of token ids", field=where)


def parse_line(obj, where: str, tokenize) -> Request:
    if not isinstance(obj, dict) or set(obj) - {"query", "items"} or "query" not in obj:
        raise MibenchError('expected {"query": ..., "items": [...]} and nothing else',
                           field=where)
    items = obj.get("items")
    if not isinstance(items, list) or not items:
        raise MibenchError("items must be a non-empty list", field=where)
    return Request(query=_ids(obj["query"], f"{where} query", tokenize),
                   items=tuple(_ids(it, f"{where} items[{i}]", tokenize)
                               for i, it in enumerate(items)))


def read_requests(path: str | Path,
                  tokenize: Callable[[str], list[int]] | None = None) -> list[Request]:
    path = Path(path)
    if not path.is_file():
        raise MibenchError("requests file not found", field=str(path))
    out = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise MibenchError(f"invalid JSON: {e.msg}", field=f"{path}:{n}") from None
        out.append(parse_line(obj, f"{path}:{n}", tokenize))
    if not out:
        raise MibenchError("no requests in file", field=str(path))
    return out

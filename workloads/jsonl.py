"""Requests from a JSONL file: one object a line, `{"query": ..., "items": [...]}`.

`query` is a string (tokenized with the model's tokenizer, without special tokens) or a
list of token ids; `items` a list of strings or a list of token-id lists, not mixed
(`workloads.request.RequestModel`). Blank lines and lines starting with `#` are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError, TextTooLong
from mibench.files import read_bounded

from .request import Request, RequestModel, parse_request

# a requests file is read whole, then held as token lists (up to 28 bytes of memory per byte
# of file: harness/config/case_problems.py FILE_BYTES): past this, 14 GiB, more than a machine
# that runs mibench gives one workload; refused from its size before a byte is read
MAX_REQUESTS_BYTES = 512 * 1024**2


def _ids(value, where: str, tokenize) -> tuple[int, ...]:
    if isinstance(value, str):
        try:
            if tokenize is None:
                raise MibenchError("the model has no tokenizer")
            return tuple(int(t) for t in tokenize(value))
        except TextTooLong as e:
            raise e.under(where) from None
        except MibenchError as e:
            raise MibenchError(f"text request, but {e}", field=where) from None
    return tuple(value)


def tokenized(req: RequestModel, where: str, tokenize) -> Request:
    """A validated request in token ids (its text tokenized with `tokenize`)."""
    return Request(query=_ids(req.query, f"{where} query", tokenize),
                   items=tuple(_ids(it, f"{where} items[{i}]", tokenize)
                               for i, it in enumerate(req.items)))


def scan_requests(path: str | Path) -> list[tuple[str, RequestModel]]:
    """Every request of the file, validated but not tokenized, with where it is
    (`FILE:LINE`); a MibenchError naming the file or the line. Read through the bounded
    reader (at most MAX_REQUESTS_BYTES; a FIFO, a device or a link loop refused unread)."""
    path = Path(path)
    raw = read_bounded(path, MAX_REQUESTS_BYTES, "requests file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MibenchError(f"not a text file (byte {e.start} is not UTF-8)",
                           field=str(path)) from None
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            obj = json.loads(line)
        except (json.JSONDecodeError, RecursionError, ValueError) as e:
            msg = e.msg if isinstance(e, json.JSONDecodeError) else str(e).splitlines()[0]
            raise MibenchError(f"invalid JSON: {msg}", field=f"{path}:{n}") from None
        out.append((f"{path}:{n}", parse_request(obj, f"{path}:{n}")))
    if not out:
        raise MibenchError("no requests in file", field=str(path))
    return out


def read_requests(path: str | Path,
                  tokenize: Callable[[str], list[int]] | None = None) -> list[Request]:
    return [tokenized(req, where, tokenize) for where, req in scan_requests(path)]

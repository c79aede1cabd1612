"""What a workload materialises into: requests in token ids; and the one validator of a
request as a file gives it (`mibench score --request`, a line of a `requests:` JSONL file).
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from mibench.checks import invalid_text
from mibench.errors import MibenchError


@dataclasses.dataclass(frozen=True)
class Request:
    """One scoring request in token ids: a query and its items."""

    query: tuple[int, ...]
    items: tuple[tuple[int, ...], ...]


TokenIds = Annotated[list[Annotated[StrictInt, Field(ge=0)]], Field(min_length=1)]
Text = Annotated[StrictStr, Field(min_length=1)]
SHAPE = '{"query": ..., "items": [...]}'


class RequestModel(BaseModel):
    """A request as JSON gives it, strictly: `query` a list of token ids or a string;
    `items` a non-empty list of token-id lists or a non-empty list of strings, not mixed."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    query: TokenIds | Text
    items: Annotated[list[TokenIds], Field(min_length=1)] | Annotated[list[Text],
                                                                       Field(min_length=1)]


def _kind(value) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "a boolean",
            list: "a list", dict: "an object", type(None): "null"}.get(type(value),
                                                                      type(value).__name__)


def _problem(value, what: str) -> str:
    """Why `value` is not a list of token ids or a string (`what` names it)."""
    if isinstance(value, str):
        return f"{what} is an empty string"
    if not isinstance(value, list):
        return f"{what} must be a list of token ids or a string, got {_kind(value)}"
    if not value:
        return f"{what} is an empty list"
    for j, t in enumerate(value):
        if isinstance(t, bool) or not isinstance(t, int) or t < 0:
            return (f"{what}: token {j} is {t!r}; expected a list of token ids (integers "
                    ">= 0) or a string")
    return f"{what} is not a list of token ids or a string"


def explain(obj) -> str:
    """One line saying what is wrong with `obj` as a request (the validator refused it)."""
    bad_text = invalid_text(obj)
    if bad_text is not None:  # a lone surrogate: JSON's "\ud800" is no Unicode text
        return f"{bad_text[0] or 'the request'} {bad_text[1]}"
    if not isinstance(obj, dict):
        return f"expected {SHAPE}, got {_kind(obj)}"
    extra = sorted(set(obj) - {"query", "items"}, key=str)
    if extra:
        return f"expected {SHAPE} and nothing else (unknown key {extra[0]!r})"
    missing = [k for k in ("query", "items") if k not in obj]
    if missing:
        return f"expected {SHAPE}: {missing[0]} is missing"
    query, items = obj["query"], obj["items"]
    if not (isinstance(query, str) and query) and not (
            isinstance(query, list) and query and all(
                type(t) is int and t >= 0 for t in query)):
        return _problem(query, "query")
    if not isinstance(items, list) or not items:
        got = "an empty list" if items == [] else _kind(items)
        return (f"items must be a non-empty list (of token-id lists or of strings), got {got}"
                + (" (a string is one item: put it in a list)" if isinstance(items, str) else ""))
    for i, item in enumerate(items):
        if not (isinstance(item, str) and item):
            if not (isinstance(item, list) and item and all(type(t) is int and t >= 0
                                                            for t in item)):
                return _problem(item, f"items[{i}]")
    kinds = {isinstance(item, str) for item in items}
    if len(kinds) > 1:
        first_text = next(i for i, item in enumerate(items) if isinstance(item, str))
        first_ids = next(i for i, item in enumerate(items) if not isinstance(item, str))
        return (f"items mixes text (items[{first_text}]) and token ids (items[{first_ids}]): "
                "give every item as text or every item as token ids")
    return f"expected {SHAPE}"


def parse_request(obj, where: str) -> RequestModel:
    """`obj` (parsed JSON) as a validated request, or a MibenchError naming `where`."""
    try:
        return RequestModel.model_validate(obj)
    except ValidationError:
        raise MibenchError(explain(obj), field=where) from None

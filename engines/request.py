"""A scoring request, validated once: every bad input is an InputError naming its field."""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Sequence

from mibench.checks import text_problem
from mibench.errors import InputError, MibenchError

SEMANTICS = ("delimited", "plain")


def resolve_semantics(semantics, delimiter) -> str:
    """The semantics a request is scored under: `delimited` (each item read after
    `query + [delimiter]`) or `plain` (after `query` alone). None derives it: delimited when
    there is a delimiter, else plain. A MibenchError naming `semantics` for any other value
    and for `delimited` without a delimiter."""
    if semantics is None:
        return "plain" if delimiter is None else "delimited"
    if not isinstance(semantics, str) or semantics not in SEMANTICS:
        raise MibenchError(f"must be one of {', '.join(SEMANTICS)}, got {semantics!r}",
                           field="semantics")
    if semantics == "delimited" and delimiter is None:
        raise MibenchError("delimited semantics reads each item after `query + [delimiter]` "
                           "and needs a delimiter token; give one, or use semantics plain "
                           "(`query + item`)", field="semantics")
    return semantics


@dataclasses.dataclass(frozen=True)
class ScoreRequest:
    """Validated token ids. `semantics`: `delimited` (items read after `query d`, a
    delimiter is given) or `plain` (after `query`; a delimiter, when given, only separates
    the items of a packed sequence)."""

    query: tuple[int, ...]
    items: tuple[tuple[int, ...], ...]
    labels: tuple[int, ...]
    apply_softmax: bool
    delimiter: int | None
    semantics: str | None = None  # None: delimited with a delimiter, else plain

    def __post_init__(self):
        object.__setattr__(self, "semantics", resolve_semantics(self.semantics, self.delimiter))

    @property
    def prefix(self) -> tuple[int, ...]:
        """What every item follows: the query, plus the delimiter under delimited
        semantics."""
        return self.query + ((self.delimiter,) if self.semantics == "delimited" else ())

    def sequence(self, i: int) -> tuple[int, ...]:
        """The standalone sequence of item i, whose last token's next-token scores we want."""
        return self.prefix + self.items[i]


def _tokens(value, field: str, tokenizer) -> tuple[int, ...]:
    if isinstance(value, bytes | bytearray | memoryview | dict):
        raise InputError(f"must be a list of token ids or a string, got {type(value).__name__}",
                         field=field)
    if isinstance(value, str):
        check_text(value, field)
        if tokenizer is None:
            raise InputError("text given but the model has no tokenizer; pass token ids",
                             field=field)
        value = tokenizer.encode(value, add_special_tokens=False)
    if not isinstance(value, Sequence) and not hasattr(value, "tolist"):
        raise InputError(f"must be a list of token ids or a string, got {type(value).__name__}",
                         field=field)
    ids = value.tolist() if hasattr(value, "tolist") else list(value)
    if not isinstance(ids, list):  # a numpy scalar
        raise InputError(f"must be a list of token ids or a string, got {ids!r}", field=field)
    if not set(map(type, ids)) <= {int}:  # the fast check (C loops); then find the culprit
        for j, t in enumerate(ids):
            if isinstance(t, bool) or not isinstance(t, numbers.Integral):
                raise InputError(f"token {j} is {t!r}, not an integer id", field=field)
    if not ids:
        raise InputError("is empty", field=field)
    return tuple(map(int, ids))


def check_text(value, field: str) -> None:
    """Text that is not Unicode (a lone surrogate, e.g. from JSON's `"\\ud800"`) is an
    InputError naming `field`, before any tokenizer or server sees it."""
    problem = text_problem(value) if isinstance(value, str) else None
    if problem:
        raise InputError(problem, field=field)


def check_texts(query, items) -> None:
    """`check_text` of a request's query and each item given as text."""
    check_text(query, "query")
    if isinstance(items, list | tuple):
        for i, item in enumerate(items):
            check_text(item, f"items[{i}]")


def _check_range(ids: Sequence[int], field: str, vocab_size: int) -> None:
    if not ids or (min(ids) >= 0 and max(ids) < vocab_size):
        return
    for j, t in enumerate(ids):
        if not 0 <= t < vocab_size:
            raise InputError(f"token id {t} at position {j} is outside the vocabulary "
                             f"[0, {vocab_size})", field=field)


def _is_bool(value) -> bool:
    """True and False (and numpy's booleans), never 1, "no" or None."""
    return isinstance(value, bool) or (type(value).__module__ == "numpy"
                                       and type(value).__name__ in ("bool", "bool_"))


def make_request(query, items, label_token_ids, *, apply_softmax: bool = False,
                 delimiter: int | None = None, vocab_size: int, max_length: int,
                 tokenizer=None, semantics: str | None = None) -> ScoreRequest:
    """Tokenize (when given text) and validate a request against the model's limits.
    `semantics` None: delimited with a delimiter, plain without (`resolve_semantics`)."""
    if not _is_bool(apply_softmax):
        raise InputError(f"must be True or False, got {apply_softmax!r}", field="apply_softmax")
    try:
        semantics = resolve_semantics(semantics, delimiter)
    except MibenchError as e:
        raise e.under("semantics", InputError) from None
    q = _tokens(query, "query", tokenizer)
    _check_range(q, "query", vocab_size)
    if isinstance(items, str | bytes) or not isinstance(items, Sequence) or len(items) == 0:
        raise InputError("must be a non-empty list of items", field="items")
    kinds = [isinstance(item, str) for item in items]
    if any(kinds) and not all(kinds):
        raise InputError(f"mixes text (items[{kinds.index(True)}]) and token ids "
                         f"(items[{kinds.index(False)}]): give every item as text or every "
                         "item as token ids", field="items")
    its = tuple(_tokens(item, f"items[{i}]", tokenizer) for i, item in enumerate(items))
    for i, item in enumerate(its):
        _check_range(item, f"items[{i}]", vocab_size)
    if hasattr(label_token_ids, "tolist") and not isinstance(label_token_ids, Sequence):
        label_token_ids = label_token_ids.tolist()  # a numpy array of ids
    if isinstance(label_token_ids, str | bytes) or not isinstance(label_token_ids, Sequence) \
            or len(label_token_ids) == 0:
        raise InputError("must be a non-empty list of token ids", field="label_token_ids")
    labels = _tokens(list(label_token_ids), "label_token_ids", None)
    _check_range(labels, "label_token_ids", vocab_size)
    seen: set[int] = set()
    repeated = next((x for x in labels if x in seen or seen.add(x)), None)
    if repeated is not None:
        raise InputError(f"holds token id {repeated} twice: each label is one column of the "
                         "scores (SGLang and mibench serve refuse a repeat too)",
                         field="label_token_ids")
    if delimiter is not None:
        if isinstance(delimiter, bool) or not isinstance(delimiter, numbers.Integral):
            raise InputError(f"must be a token id or None, got {delimiter!r}", field="delimiter")
        delimiter = int(delimiter)
        _check_range([delimiter], "delimiter", vocab_size)
        if delimiter in q:
            raise InputError(f"delimiter {delimiter} occurs in the query at position "
                             f"{q.index(delimiter)}", field="query")
        for i, item in enumerate(its):
            if delimiter in item:
                raise InputError(f"delimiter {delimiter} occurs in the item at position "
                                 f"{item.index(delimiter)}", field=f"items[{i}]")
    req = ScoreRequest(q, its, labels, bool(apply_softmax), delimiter, semantics)
    longest = max(range(len(its)), key=lambda i: len(its[i]))
    if len(req.sequence(longest)) > max_length:
        raise InputError(f"query + item is {len(req.sequence(longest))} tokens, longer than the "
                         f"model's maximum of {max_length}", field=f"items[{longest}]")
    return req

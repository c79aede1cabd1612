"""A `POST /v1/score` body as SGLang reads it (sglang 0.5.23: protocol.py `ScoringRequest`,
serving_score.py, tokenizer_manager_score_mixin.py `score_request`; sglang-jax cddbf6f1),
parsed into a `ScoreCall` for `mibench serve` (harness/serve/app.py). Where SGLang's own code
decides, mibench does the same:

- any `model` name is accepted and echoed in the answer (SGLang's default name `default`
  is mibench's served name);
- an empty `items` list (or `""`) is answered `{"scores": []}` without scoring, as SGLang
  returns before it checks anything else;
- booleans follow pydantic's lax mode, as SGLang's model does: `true`/`false`, `1`/`0` and
  the strings `"true"`, `"false"`, `"yes"`, `"no"`, `"on"`, `"off"`, `"1"`, `"0"`, ...;
  anything else (`2`, `"maybe"`, `null`) is 400;
- keys SGLang does not define are ignored (pydantic's default);
- a text query with token-id items, or token ids with text items, is 400 (SGLang's
  "Invalid combination of query/items types");
- `item_first: true` scores `item + query` (SGLang's single-item path): each item is
  scored as the prefix of a one-item request whose item is the query, in mode `single`
  (the query is a shared suffix, which no packing mode can share), under the server's
  semantics (`item d query` delimited, `item query` plain);
- `label_token_ids` with a repeated id is 400, as in SGLang.

Where mibench differs, and why:

- a key within a typo of a known key (`apply_sofmax`, difflib ratio >= 0.8) is 400 naming
  it, not ignored: it would silently score something else, and mibench never returns
  silently wrong scores; other unknown keys are ignored;
- `query` is required and neither it nor an item may be empty (mibench's bad inputs,
  docs/python-api.md; SGLang scores the item alone, or the query alone);
- SGLang keys mibench does not implement (embedding overrides, pooled hidden states,
  `temperature` other than 1, `return_token_logprobs`, `score_extraction_token`, one label
  list per item) are 400 naming the key when set, never ignored;
- text is tokenized piece by piece (query, each item) and then joined as token ids; SGLang
  joins the strings first (`f"{query}{item}"`), which a BPE tokenizer may split
  differently at the seam (a byte-level tokenizer, as the embedded presets', never does);
- a body that is not valid UTF-8, or a JSON string with a lone surrogate (`"\\ud800"`), is
  400 naming the field (SGLang: the body is read as UTF-8 JSON, a surrogate fails later);
- a Content-Type other than `application/json` is 400 (SGLang's `validate_json_request`
  answers 400, not 415, and so does mibench).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re

from mibench.checks import invalid_text
from mibench.engines import MODES, InputError, MibenchError, engine_mode

SCORE_KEYS = ("query", "items", "label_token_ids", "apply_softmax", "item_first", "model",
              "mibench")
# SGLang request keys mibench does not implement, with the value that means "unused"
UNSUPPORTED = {"embed_override_token_id": None, "query_embed_overrides": None,
               "item_embed_overrides": None, "return_pooled_hidden_states": False,
               "temperature": 1.0, "return_token_logprobs": False,
               "score_extraction_token": None}
KNOWN = SCORE_KEYS + tuple(UNSUPPORTED)
TYPO_RATIO = 0.8  # difflib's ratio from which an unknown key is taken for a typo
# a JSON escape that can decode to a lone surrogate (valid UTF-8 cannot hold one)
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


class BadRequest(Exception):
    """A request the server refuses: `status` (400, 408, 413, 503) naming `field`."""

    def __init__(self, message: str, field: str | None, status: int = 400):
        super().__init__(message)
        self.field, self.status = field, status


@dataclasses.dataclass
class ScoreCall:
    """A parsed request: what the engine is called with, and how the answer is named.
    `overrides` are the engine keyword arguments of its `mibench` object (mode, options)."""

    query: object
    items: list
    labels: object
    apply_softmax: bool
    item_first: bool
    model: str | None
    overrides: dict


def decode(raw: bytes) -> dict:
    """The body as a JSON object; a BadRequest naming `body` (not UTF-8, not JSON, not an
    object) or the field that holds a lone surrogate."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise BadRequest(f"is not UTF-8: byte 0x{raw[e.start]:02x} at offset {e.start}",
                         "body") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"not JSON: {str(e).splitlines()[0] if str(e) else e}",
                         "body") from None
    if not isinstance(data, dict):
        raise BadRequest(f"must be a JSON object (SGLang's ScoringRequest), got "
                         f"{type(data).__name__}", "body")
    if SURROGATE_ESCAPE.search(text):
        found = invalid_text(data)
        if found is not None:
            raise BadRequest(found[1], found[0] or "body")
    return data


@functools.cache
def _bool_adapter():
    from pydantic import TypeAdapter

    return TypeAdapter(bool)


def as_bool(value, field: str) -> bool:
    """SGLang's bool (pydantic's lax mode); a BadRequest naming the field otherwise."""
    from pydantic import ValidationError

    try:
        return _bool_adapter().validate_python(value)
    except ValidationError:
        raise BadRequest(f"must be true or false, got {json.dumps(value)[:40]}",
                         field) from None


def check_keys(data: dict) -> None:
    """Unknown keys are ignored, as SGLang does, except one that looks like a typo of a
    known key; SGLang keys mibench does not implement are refused when set."""
    for key in data:
        if key in KNOWN:
            continue
        close = difflib.get_close_matches(key, KNOWN, n=1, cutoff=TYPO_RATIO)
        if close:
            raise BadRequest(f"unknown key; did you mean {close[0]!r}? (other keys SGLang "
                             "does not define are ignored)", key)
    for key, unused in UNSUPPORTED.items():
        if data.get(key, unused) not in (unused, None):
            raise BadRequest("is not supported by mibench serve", key)


def check_forms(query, items, labels) -> None:
    """SGLang's forms: text with text, token ids with token ids; one list of labels, no
    label twice."""
    texts = [isinstance(i, str) for i in items]
    if isinstance(query, str) and texts and not any(texts):
        raise BadRequest("are token ids but the query is text: give both as text or both "
                         "as token ids (SGLang scores no other combination)", "items")
    if isinstance(query, list) and texts and all(texts):
        raise BadRequest("are text but the query is token ids: give both as text or both "
                         "as token ids (SGLang scores no other combination)", "items")
    if isinstance(labels, list):
        if labels and all(isinstance(x, list) for x in labels):
            raise BadRequest("one label list per item (SGLang 0.5.23) is not supported by "
                             "mibench serve: give one list of label ids for every item",
                             "label_token_ids")
        hashable = [x for x in labels if isinstance(x, int)]
        if len(set(hashable)) != len(hashable):
            repeated = next(x for x in hashable if hashable.count(x) > 1)
            raise BadRequest(f"holds token id {repeated} twice (SGLang refuses repeated "
                             "labels)", "label_token_ids")


def parse_overrides(value, settings) -> dict:
    """The request's own `mibench` settings: `{"mode": ..., OPTION: ...}` (the jax mode
    registry's modes and options: mask, chunk_size, extend_batch_size, ...) as engine
    keyword arguments over the server's; a BadRequest naming `mibench.KEY` otherwise. A
    request that names another mode than the server's gets that mode's defaults, not the
    server's options."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest(f"must be an object such as {{\"mode\": \"packed\", \"mask\": "
                         f"\"segment\"}}, got {type(value).__name__}", "mibench")
    mode = value.get("mode", settings.mode if settings else "single")
    try:
        declared = engine_mode("jax", mode)
    except MibenchError as e:
        raise BadRequest(e.message, "mibench.mode") from None
    options = {k: v for k, v in value.items() if k != "mode"}
    if settings is not None and mode == settings.mode:
        options = {**settings.options, **options}
    try:
        declared.check(options)
    except MibenchError as e:
        raise BadRequest(e.message, f"mibench.{e.field}" if e.field else "mibench") from None
    return {"mode": mode, **options}


def parse_request(raw: bytes, settings=None) -> ScoreCall:
    """The ScoreCall of a /v1/score body (module docstring); a BadRequest naming the field
    otherwise. Token ids and text are checked by the engine."""
    data = decode(raw)
    check_keys(data)
    for key in ("query", "items", "label_token_ids"):
        if data.get(key) is None:
            raise BadRequest("is required", key)
    softmax = as_bool(data.get("apply_softmax", False), "apply_softmax")
    item_first = as_bool(data.get("item_first", False), "item_first")
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest(f"must be a string, got {json.dumps(model)[:40]}", "model")
    overrides = parse_overrides(data.get("mibench"), settings)
    if item_first and overrides.get("mode", "single") != "single":
        raise BadRequest(f"true scores each item as its own sequence (item + query, mode "
                         f"single); mibench.mode {overrides['mode']} cannot share a "
                         "suffix", "item_first")
    items = data["items"]
    items = ([items] if items else []) if isinstance(items, str) else items
    if isinstance(items, list):
        check_forms(data["query"], items, data["label_token_ids"])
    return ScoreCall(data["query"], items, data["label_token_ids"], softmax, item_first,
                     model, overrides)


def check_content_type(value: str | None) -> None:
    """SGLang's validate_json_request: the media type must be application/json."""
    media = (value or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise BadRequest(f"must be application/json, got {value or 'none'!r}: the body is "
                         "SGLang's ScoringRequest as JSON", "content-type")


class Scorer:
    """What the scoring thread runs for a call: the engine with the server's settings, the
    request's `mibench` overrides on top (another mode starts from its own defaults)."""

    def __init__(self, engine, settings):
        self.engine, self.settings = engine, settings
        self.kwargs = dict(mode=settings.mode, delimiter=settings.delimiter,
                           **settings.options)
        if settings.semantics is not None:
            self.kwargs["semantics"] = settings.semantics

    def options(self, overrides: dict) -> dict:
        if not overrides:
            return self.kwargs
        call = {**self.kwargs, **overrides}
        if overrides["mode"] != self.settings.mode:
            call = {k: v for k, v in call.items() if k not in self.settings.options
                    or k in overrides}
        return call

    def __call__(self, call: ScoreCall):
        if call.item_first:
            return self.item_first(call)
        return self.engine.score(call.query, call.items, call.labels,
                                 apply_softmax=call.apply_softmax,
                                 **self.options(call.overrides))

    def item_first(self, call: ScoreCall):
        """SGLang's `item_first`: the next token after `item + query`, each item its own
        sequence (mode single), scored as the prefix of a one-item request whose item is
        the query; the engine's field names are put back (`query` <-> `items[i]`)."""
        from mibench.engines import ScoreResult

        if not isinstance(call.items, list):
            raise InputError("must be a non-empty list of items", field="items")
        kwargs = {**self.options(call.overrides or {"mode": "single"}), "mode": "single"}
        kwargs = {k: v for k, v in kwargs.items()
                  if k in ("mode", "delimiter", "semantics", *MODES["jax"]["single"].options)}
        rows, tokens = [], 0
        for i, item in enumerate(call.items):
            try:
                result = self.engine.score(item, [call.query], call.labels,
                                           apply_softmax=call.apply_softmax, **kwargs)
            except InputError as e:
                field = {"query": f"items[{i}]", "items[0]": "query"}.get(e.field, e.field)
                raise e.under(field, InputError) from None
            rows += result.scores
            tokens += result.num_tokens
        return ScoreResult(scores=rows, mode="single", num_items=len(rows), num_tokens=tokens)

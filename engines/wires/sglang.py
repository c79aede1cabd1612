"""SGLang's `/v1/score` wire, spoken by SGLang, sglang-jax and `mibench serve`.

The request is SGLang's `ScoringRequest` (python/sglang/srt/entrypoints/openai/
protocol.py): `query` (token ids or text), `items` (token-id lists or strings),
`label_token_ids`, `apply_softmax`, `item_first` (always false here: query then item) and
`model` when a served name is set. The answer is SGLang's `ScoringResponse`: `scores` (one
row per item, one column per label), `model`, `usage`, `object: "scoring"`. A refused
request is SGLang's ErrorResponse (`message`, `param` naming the field) or FastAPI's 422.
`GET /v1/models` is where a mibench server says what it scores with (its model card's
`mibench` entry); `GET /get_server_info` is what any of them says it is.

`decode` checks the scores where they enter: the request's shape and numbers, then the
check every engine's scores pass (mibench/checks.py `check_scores`: finite probabilities
in [0, 1], rows that sum to 1 with apply_softmax or at most 1 without, within the dtype's
tolerance); anything else is a ValueError (InvalidScores) naming the item.
"""

from __future__ import annotations

import json

from mibench.checks import check_scores
from mibench.errors import InputError

from ..http_client import HttpClient, Reply

SCORE_PATH = "/v1/score"
MODELS_PATH = "/v1/models"
SERVER_INFO_PATH = "/get_server_info"


class SGLang:
    """SGLang's `/v1/score` (module docstring)."""

    name = "sglang"
    score_path = SCORE_PATH

    @staticmethod
    def encode(query, items, label_token_ids, apply_softmax: bool = False,
               model: str | None = None) -> bytes:
        """The JSON request body, encoded once so timed sends only send."""
        return json.dumps(score_body(query, items, label_token_ids, apply_softmax, model),
                          separators=(",", ":")).encode()

    @staticmethod
    def send(client: HttpClient, body: bytes) -> Reply:
        return client.request("POST", SCORE_PATH, body)

    @staticmethod
    def decode(reply: Reply, num_items: int, num_labels: int, apply_softmax: bool = False,
               dtype: str | None = "float32") -> list[list[float]]:
        return parse_scores(reply, num_items, num_labels, apply_softmax, dtype)

    @staticmethod
    def usage(reply: Reply) -> int | None:
        """`usage.prompt_tokens` of the answer, when it is a count."""
        try:
            n = json.loads(reply.body)["usage"]["prompt_tokens"]
        except (ValueError, KeyError, TypeError):
            return None
        return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None

    @staticmethod
    def error(reply: Reply) -> InputError:
        """The server's 400 as an InputError: SGLang's ErrorResponse names the field in
        `param`; FastAPI's 422 in `detail[0].loc`."""
        try:
            data = json.loads(reply.body)
        except ValueError:
            return InputError(reply.text(300), field="request")
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return InputError(data["message"], field=data.get("param") or "request")
        detail = data.get("detail") if isinstance(data, dict) else None
        if isinstance(detail, list) and detail and isinstance(detail[0], dict):
            loc = [str(p) for p in detail[0].get("loc", []) if p != "body"]
            return InputError(str(detail[0].get("msg")), field=".".join(loc) or "request")
        return InputError(reply.text(300), field="request")

    @staticmethod
    def facts(client: HttpClient, served_model: str | None) -> dict | None:
        """What a mibench server says it scores with (the `mibench` entry of its model
        card: mode, delimiter, semantics, dtype, tp, options); {} for another server, None
        when the server does not answer now."""
        data = client.get_json(MODELS_PATH)
        if data is None:
            return None
        try:
            cards = data.get("data") or []
            card = next((c for c in cards if c.get("id") == served_model), cards[0])
            return dict(card.get("mibench") or {})
        except (AttributeError, IndexError, TypeError, ValueError):
            return {}

    @staticmethod
    def info(client: HttpClient) -> dict:
        """What the server says about itself, for provenance (`GET /get_server_info`:
        its `version` and settings), trimmed to scalars and short lists; {} when it does
        not say."""
        data = client.get_json(SERVER_INFO_PATH)
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and (
            isinstance(v, str | int | float | bool) or v is None
            or (isinstance(v, list) and len(v) <= 16
                and all(isinstance(x, str | int | float | bool) for x in v)))}


def score_body(query, items, label_token_ids, apply_softmax: bool = False,
               model: str | None = None) -> dict:
    """SGLang's ScoringRequest for query + item scoring (`item_first` false); `model`
    only when a served name is given."""
    body = {"query": _plain(query), "items": [_plain(i) for i in items] if isinstance(
        items, list | tuple) or hasattr(items, "tolist") else items,
        "label_token_ids": _plain(label_token_ids), "apply_softmax": apply_softmax,
        "item_first": False}
    if model is not None:
        body["model"] = model
    return body


def _plain(value):
    """Lists of Python ints for JSON (tuples, numpy arrays); text and anything else as is
    (the server names what is wrong with it)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value) if isinstance(value, tuple) else value


def parse_scores(reply: Reply, num_items: int, num_labels: int, apply_softmax: bool = False,
                 dtype: str | None = "float32") -> list[list[float]]:
    """The scores of a 200 reply, checked against the request: its shape, every score a
    number, then `check_scores` (finite probabilities, rows that sum as they must within
    the dtype's tolerance); a ValueError naming the item (its index in the request)
    otherwise."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        raise ValueError(f"not JSON: {reply.text(200)!r}") from None
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, list) or len(scores) != num_items:
        got = f"{len(scores)} rows" if isinstance(scores, list) else type(scores).__name__
        raise ValueError(f"expected scores for {num_items} item(s) x {num_labels} label(s), "
                         f"got {got}: {reply.text(200)!r}")
    for i, row in enumerate(scores):
        _check_row(i, row, num_labels)
    rows = [[float(s) for s in row] for row in scores]
    if rows:
        check_scores(rows, apply_softmax, dtype)
    return rows


def _check_row(i: int, row, num_labels: int) -> None:
    if not isinstance(row, list) or len(row) != num_labels:
        raise ValueError(f"item {i}: expected {num_labels} score(s), got {row!r:.200}")
    for j, s in enumerate(row):
        if isinstance(s, bool) or not isinstance(s, int | float):
            raise ValueError(f"item {i}: score {j} is {s!r:.50}, not a number")
        if isinstance(s, int) and not 0 <= s <= 1:  # 10**400 is no float at all
            raise ValueError(f"item {i}: score {j} is {s!r:.50}, not a probability in [0, 1]")

"""The `http` engine: a server that speaks SGLang's `POST /v1/score` (such as `mibench
serve`), seen through the engine contract (engines/contract.py).

`score` sends one request and returns its ScoreResult, so every parity check works against
a server as against an engine. `ScoreClient` is the wire client (one keep-alive connection,
stdlib `http.client`), shared with the harness's load generator (harness/run/http_case.py).

The request body is SGLang's `ScoringRequest` (python/sglang/srt/entrypoints/openai/
protocol.py): `query` (token ids or text), `items` (token-id lists or strings),
`label_token_ids`, `apply_softmax`, `item_first` (always false here: query then item) and
`model` when a served name is set. The response is SGLang's `ScoringResponse`: `scores`
(one row per item, one column per label), `model`, `usage`, `object: "scoring"`. The
delimiter and the semantics are the server's (`mibench serve --delimiter --semantics`):
SGLang's body has no field for them. A mibench server reports them, with its mode and
dtype, in `GET /v1/models` (`mibench` in the model card); a request whose delimiter or
semantics differ from the server's is refused before it is sent. Other servers report
nothing and are taken at their word.

The model facts (`model_config`: vocabulary, shape) are those of `model` when it is a
preset (`embedded:<name>`) or a checkpoint folder; for any other name (a served model that
is nowhere here) they are unknown (None): such an engine scores given token ids, and the
harness refuses to generate a workload for it.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import tempfile
import threading
import urllib.parse
from pathlib import Path

from mibench.engines.config import ModelConfig
from mibench.engines.modes.registry import MODES, resolve_semantics
from mibench.engines.result import ScoreResult
from mibench.errors import InputError, MibenchError, ModelError

SCORE_PATH = "/v1/score"
MODELS_PATH = "/v1/models"
DEFAULT_TIMEOUT_S = 60.0
# what a status of a request that got no HTTP response is called
REFUSED, TIMEOUT, CONNECTION = "refused", "timeout", "connection"


@dataclasses.dataclass(frozen=True)
class Reply:
    """What came back for one request: `status` is the HTTP status, or `refused`,
    `timeout`, `connection` when no response came; `body` the response's bytes, or the
    failure's reason."""

    status: int | str
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status == 200

    def text(self, limit: int | None = None) -> str:
        text = self.body.decode("utf-8", errors="replace")
        return text if limit is None or len(text) <= limit else text[:limit] + "..."


def parse_base_url(url) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of `http://HOST[:PORT][/PREFIX]`, or a
    MibenchError naming `base_url`."""
    if not isinstance(url, str) or not url:
        raise MibenchError(f"must be a URL like http://127.0.0.1:8000, got {url!r}",
                           field="base_url")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise MibenchError(f"{url!r} is not a URL: {e}", field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MibenchError(f"expected http://HOST[:PORT] or https://..., got {url!r}",
                           field="base_url")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise MibenchError(f"expected http://HOST[:PORT][/PREFIX] without a query, fragment "
                           f"or user, got {url!r}", field="base_url")
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path.rstrip("/")


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


class ScoreClient:
    """One keep-alive connection to a `/v1/score` server. Not thread-safe: one per thread.

    `post` never raises for a failed request: a refused connection, a timeout (`timeout_s`
    on connecting and on each read) or a dropped connection is a Reply with that status,
    and the next request opens a fresh connection."""

    def __init__(self, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.base_url = base_url
        self.scheme, self.host, self.port, self.prefix = parse_base_url(base_url)
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    parse_url = staticmethod(parse_base_url)

    @staticmethod
    def body(query, items, label_token_ids, apply_softmax: bool = False,
             model: str | None = None) -> bytes:
        """The JSON request body (score_body), encoded once so timed sends only send."""
        return json.dumps(score_body(query, items, label_token_ids, apply_softmax, model),
                          separators=(",", ":")).encode()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """One request; a keep-alive connection the server closed meanwhile is retried
        once on a fresh one (scoring is idempotent)."""
        for attempt in (0, 1):
            reused = self._conn is not None and self._conn.sock is not None
            conn = self._connection()
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                conn.request(method, self.prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                if resp.will_close:
                    self.close()
                return Reply(resp.status, data)
            except ConnectionRefusedError as e:
                self.close()
                return Reply(REFUSED, _reason(e).encode())
            except TimeoutError as e:
                self.close()
                return Reply(TIMEOUT, f"no answer within {self.timeout_s:g} s ({_reason(e)})"
                             .encode())
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if reused and attempt == 0 and isinstance(
                        e, http.client.RemoteDisconnected | ConnectionResetError
                        | BrokenPipeError):
                    continue  # an idle keep-alive connection the server had closed
                return Reply(CONNECTION, _reason(e).encode())
        raise AssertionError("unreachable")  # pragma: no cover

    def post(self, body: bytes) -> Reply:
        """POST a prepared body to /v1/score."""
        return self.request("POST", SCORE_PATH, body)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def parse_scores(reply: Reply, num_items: int, num_labels: int) -> list[list[float]]:
    """The scores of a 200 reply, checked against the request's shape; a ValueError saying
    what is wrong with the body otherwise."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        raise ValueError(f"not JSON: {reply.text(200)!r}") from None
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, list) or len(scores) != num_items or any(
            not isinstance(row, list) or len(row) != num_labels
            or not all(isinstance(s, int | float) and not isinstance(s, bool) for s in row)
            for row in scores):
        raise ValueError(f"expected scores for {num_items} item(s) x {num_labels} label(s), "
                         f"got {reply.text(200)!r}")
    return [[float(s) for s in row] for row in scores]


def _facts(model: str) -> ModelConfig | None:
    """The model's facts when `model` is a preset or a folder here; None for any other
    name (a model that only the server has)."""
    from mibench.engines.facts import EMBEDDED, model_facts

    if model.startswith(EMBEDDED) or Path(model).expanduser().is_dir():
        return model_facts(model)
    return None


class HttpEngine:
    """A `/v1/score` server as an engine: `score` sends one request (engines/contract.py)."""

    name = "http"

    def __init__(self, model: str, dtype: str = "float32", tp: int = 1,
                 base_url: str | None = None, served_model: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S):
        if not isinstance(model, str) or not model:
            raise ModelError(f"must name the served model, got {model!r}", field="model")
        if base_url is None:
            raise MibenchError("the http engine needs the server's address, e.g. "
                               "http://127.0.0.1:8000", field="base_url")
        parse_base_url(base_url)
        if served_model is not None and (not isinstance(served_model, str) or not served_model):
            raise MibenchError(f"must be a model name, got {served_model!r}",
                               field="served_model")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, int | float) \
                or not 0 < timeout_s < float("inf"):
            raise MibenchError(f"must be a positive number of seconds, got {timeout_s!r}",
                               field="timeout_s")
        self.model, self.dtype, self.tp = model, dtype, tp
        self.base_url, self.served_model, self.timeout_s = base_url, served_model, timeout_s
        self.model_config = _facts(model)
        self._tokenizer = None
        self._server: dict | None = None
        self._local = threading.local()

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(MODES[self.name])

    @property
    def topology(self) -> dict:
        return {"tp": self.tp, "base_url": self.base_url}

    @property
    def tokenizer(self):
        """The model's tokenizer here (a preset's byte-level one, a folder's own), None
        when there is none (then text goes to the server as text)."""
        if self._tokenizer is None:
            self._tokenizer = _load_tokenizer(self.model) or False
        return self._tokenizer or None

    @property
    def special_ids(self) -> frozenset[int]:
        from mibench.engines.checkpoint import special_ids

        return special_ids(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        from mibench.engines.checkpoint import encode

        return encode(self.tokenizer, text)

    def server_facts(self) -> dict:
        """What a mibench server says it scores with (GET /v1/models: mode, delimiter,
        semantics, dtype, tp, options); {} for a server that does not say, or cannot be
        reached now (asked again next time)."""
        if self._server is None:
            reply = ScoreClient(self.base_url, self.timeout_s).request("GET", MODELS_PATH)
            if not reply.ok:
                return {}
            try:
                cards = json.loads(reply.body).get("data") or []
                card = next((c for c in cards if c.get("id") == self.served_model), cards[0])
                self._server = dict(card.get("mibench") or {})
            except (ValueError, AttributeError, IndexError, TypeError):
                self._server = {}
        return self._server

    def resolved_options(self, mode: str, options: dict) -> dict:
        """The server's own settings where it reports them (`server`), else nothing."""
        facts = self.server_facts()
        return {"server": facts} if facts else {}

    def close(self) -> None:
        client = getattr(self._local, "client", None)
        if client is not None:
            client.close()

    def check_server(self, delimiter, semantics) -> None:
        """Refuse a request the server would score differently from what it asks: another
        delimiter or semantics than the server's (when the server reports them)."""
        facts = self.server_facts()
        if not facts:
            return
        if "delimiter" in facts and facts["delimiter"] != delimiter:
            raise InputError(f"the server at {self.base_url} scores with delimiter "
                             f"{facts['delimiter']}, the request has {delimiter}",
                             field="delimiter")
        wanted = resolve_semantics(semantics, delimiter)
        if facts.get("semantics") not in (None, wanted):
            raise InputError(f"the server at {self.base_url} scores {facts['semantics']} "
                             f"semantics, the request asks for {wanted}", field="semantics")

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              semantics: str | None = None, **options) -> ScoreResult:
        """One POST /v1/score. The server's 400 is an InputError naming its field; no
        answer, or another status, is a MibenchError naming `base_url`."""
        if not isinstance(mode, str) or mode not in MODES[self.name]:
            raise MibenchError(f"unknown mode {mode!r} for the http engine (known: "
                               f"{', '.join(MODES[self.name])})", field="mode")
        MODES[self.name][mode].check(options)
        if not isinstance(items, list | tuple) and not hasattr(items, "tolist"):
            raise InputError("must be a non-empty list of items", field="items")
        self.check_server(delimiter, semantics)
        try:
            body = ScoreClient.body(query, items, label_token_ids, apply_softmax,
                                    self.served_model)
        except TypeError as e:
            raise InputError(f"cannot be sent as JSON: {e}", field="query") from None
        reply = self._client().post(body)
        if reply.status in (400, 422):
            raise _input_error(reply)
        if not reply.ok:
            what = reply.status if isinstance(reply.status, str) else f"HTTP {reply.status}"
            raise MibenchError(f"{self.base_url}{SCORE_PATH}: {what}: {reply.text(300)}",
                               field="base_url")
        try:
            scores = parse_scores(reply, len(items), len(label_token_ids))
        except ValueError as e:
            raise MibenchError(f"{self.base_url}{SCORE_PATH} answered 200, but {e}",
                               field="base_url") from None
        usage = _usage(reply)
        sent = _tokens_sent(query, items)
        return ScoreResult(scores=scores, mode=mode, num_items=len(scores),
                           num_tokens=usage if usage is not None else sent)

    def _client(self) -> ScoreClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = ScoreClient(self.base_url, self.timeout_s)
        return client


def _input_error(reply: Reply) -> InputError:
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


def _usage(reply: Reply) -> int | None:
    try:
        n = json.loads(reply.body)["usage"]["prompt_tokens"]
    except (ValueError, KeyError, TypeError):
        return None
    return n if isinstance(n, int) and not isinstance(n, bool) and n >= 0 else None


def _tokens_sent(query, items) -> int:
    """Token ids sent (text counts 0: the server tokenizes it)."""
    def count(x):
        return 0 if isinstance(x, str) else len(x)

    return count(query) + sum(count(i) for i in items)


def _load_tokenizer(model: str):
    """A preset's tokenizer (written to a scratch folder: no weights are generated), a
    folder's own, or None."""
    from mibench.engines.checkpoint import load_tokenizer
    from mibench.engines.facts import EMBEDDED

    if model.startswith(EMBEDDED):
        from mibench.engines.presets import PRESETS, hf_config
        from mibench.engines.tokenizer import write_tokenizer

        preset = PRESETS[model[len(EMBEDDED):]]
        with tempfile.TemporaryDirectory(prefix="mibench-tokenizer-") as tmp:
            write_tokenizer(Path(tmp), preset["special"],
                            hf_config(preset)["max_position_embeddings"])
            return load_tokenizer(Path(tmp))
    folder = Path(model).expanduser()
    return load_tokenizer(folder) if folder.is_dir() else None

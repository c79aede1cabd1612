"""The `http` engine: a scoring server (SGLang, sglang-jax, `mibench serve`, ...) seen
through the engine contract (engines/contract.py).

`score` sends one request and returns its ScoreResult, so every parity check works against
a server as against an engine. What the request and the answer look like is the engine's
wire (engines/wires/: SGLang's `/v1/score` by default); the bytes move over an HttpClient
(engines/http_client.py). The harness's load generator
(harness/under_test/requests_case.py) uses the same wire and client.

The delimiter and the semantics are the server's (`mibench serve --delimiter
--semantics`): SGLang's body has no field for them. A server that says what it scores
with (the wire's `facts`: a mibench server's model card) has a request whose delimiter or
semantics differ refused before it is sent. Other servers are taken at their word.

The model facts (`model_config`: vocabulary, shape) are those of `model` when it is a
preset (`embedded:<name>`) or a checkpoint folder; for any other name (a served model that
is nowhere here) they are unknown (None): such an engine scores given token ids, and the
harness refuses to generate a workload for it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from mibench.errors import InputError, InvalidScores, MibenchError, ModelError

from .config import ModelConfig
from .facts import tokenizer_of
from .http_client import DEFAULT_TIMEOUT_S, HttpClient, parse_base_url
from .modes.registry import MODES, engine_mode
from .request import check_texts, resolve_semantics
from .result import ScoreResult
from .wires import DEFAULT_WIRE, describe, fact_problem
from .wires import wire as wire_named


def _facts(model: str) -> ModelConfig | None:
    """The model's facts when `model` is a preset or a folder here; None for any other
    name (a model that only the server has)."""
    from .facts import EMBEDDED, model_facts

    if model.startswith(EMBEDDED) or Path(model).expanduser().is_dir():
        return model_facts(model)
    return None


class HttpEngine:
    """A scoring server as an engine: `score` sends one request (engines/contract.py) in
    the engine's wire (`wire`: a name of engines/wires.WIRES)."""

    name = "http"

    def __init__(self, model: str, dtype: str = "float32", tp: int = 1,
                 base_url: str | None = None, served_model: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, wire: str = DEFAULT_WIRE):
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
        self.wire = wire_named(wire)
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
            self._tokenizer = tokenizer_of(self.model) or False
        return self._tokenizer or None

    @property
    def special_ids(self) -> frozenset[int]:
        from .checkpoint import special_ids

        return special_ids(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        from .checkpoint import encode

        return encode(self.tokenizer, text)

    def server_facts(self) -> dict:
        """What a mibench server says it scores with (GET /v1/models: mode, delimiter,
        semantics, dtype, tp, options); {} for a server that does not say, or cannot be
        reached now (asked again next time)."""
        if self._server is None:
            client = HttpClient(self.base_url, self.timeout_s)
            try:  # None: no answer now, asked again next time
                self._server = self.wire.facts(client, self.served_model)
            finally:
                client.close()
        return self._server or {}

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
        problem = fact_problem(facts, "delimiter", delimiter)
        if problem:
            raise InputError(f"the server at {self.base_url} {problem}, the request has "
                             f"{describe(delimiter)}", field="delimiter")
        wanted = resolve_semantics(semantics, delimiter)
        if facts.get("semantics") is not None:
            problem = fact_problem(facts, "semantics", wanted)
            if problem:
                raise InputError(f"the server at {self.base_url} {problem}, the request "
                                 f"asks for {wanted}", field="semantics")

    def score(self, query, items, label_token_ids, mode: str = "single",
              apply_softmax: bool = False, delimiter: int | None = None,
              semantics: str | None = None, **options) -> ScoreResult:
        """One POST /v1/score. The server's 400 (or 413: over one of its limits) is an
        InputError naming its field; no answer, another status, or a 200 whose scores are
        not the request's (the wire's `decode`) is a MibenchError naming `base_url` (for
        wrong scores an InvalidScores naming the item)."""
        engine_mode(self.name, mode).check(options)
        if not isinstance(items, list | tuple) and not hasattr(items, "tolist"):
            raise InputError("must be a non-empty list of items", field="items")
        check_texts(query, items)  # text goes to the server as is: Unicode only
        self.check_server(delimiter, semantics)
        try:
            body = self.wire.encode(query, items, label_token_ids, apply_softmax,
                                    self.served_model)
        except TypeError as e:
            raise InputError(f"cannot be sent as JSON: {e}", field="query") from None
        reply = self.wire.send(self._client(), body)
        where = f"{self.base_url} ({self.wire.name} wire)"
        if reply.status in (400, 413, 422):  # the request (413: too large for this server)
            raise self.wire.error(reply)
        if not reply.ok:
            what = reply.status if isinstance(reply.status, str) else f"HTTP {reply.status}"
            raise MibenchError(f"{where}: {what}: {reply.text(300)}", field="base_url")
        try:
            scores = self.wire.decode(reply, len(items), len(label_token_ids),
                                      apply_softmax is True, self.dtype)
        except ValueError as e:
            raise InvalidScores(f"{where} answered 200, but {e}", field="base_url") from None
        usage = self.wire.usage(reply)
        sent = _tokens_sent(query, items)
        return ScoreResult(scores=scores, mode=mode, num_items=len(scores),
                           num_tokens=usage if usage is not None else sent)

    def _client(self) -> HttpClient:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = HttpClient(self.base_url, self.timeout_s)
        return client


def _tokens_sent(query, items) -> int:
    """Token ids sent (text counts 0: the server tokenizes it)."""
    def count(x):
        return 0 if isinstance(x, str) else len(x)

    return count(query) + sum(count(i) for i in items)

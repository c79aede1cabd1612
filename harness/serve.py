"""`mibench serve`: the JAX engine behind an SGLang-compatible `POST /v1/score`
(FastAPI, uvicorn), for benchmarking it as a server and for testing the `http` engine.

Request body (SGLang's `ScoringRequest`, python/sglang/srt/entrypoints/openai/protocol.py):
`query` (token ids or text), `items` (token-id lists, or strings; one string is one item),
`label_token_ids`, `apply_softmax` (default false), `item_first` (default false; true, the
item before the query, is refused: mibench scores query + item) and `model` (optional; when
given it must be the served name, the `--model` spec). SGLang's embedding overrides and
`return_pooled_hidden_states` are refused when set; any other key is refused too (a typo
must not pass as a default).

Response (SGLang's `ScoringResponse`): `{"scores": [[...], ...], "model": NAME, "usage":
{"prompt_tokens", "completion_tokens": 0, "total_tokens"}, "object": "scoring"}`, one row
per item and one column per label. `prompt_tokens` counts the tokens the engine ran through
the model (ScoreResult.num_tokens: a prefix scored once per item counts once per item).

A bad request is 400 with SGLang's `ErrorResponse`: `{"object": "error", "message": ...,
"type": "BadRequestError", "param": FIELD, "code": 400}`, `param` naming the field (the
engine's InputError field: `query`, `items[3]`, `label_token_ids`, ...). Anything else that
goes wrong is 500 (`InternalServerError`). `GET /health` answers `{"status": "ok"}`;
`GET /v1/models` lists the served model (SGLang's ModelList) with a `mibench` entry: the
mode, delimiter, semantics, dtype, tp and options it scores with, which the http engine
checks its requests against.

Requests are scored one at a time (the engine is not re-entrant), in the order they
arrived: one scoring thread with a FIFO queue, unbounded, so none is dropped under load;
the event loop keeps accepting while one scores. Ctrl-C (SIGINT) or SIGTERM stops
accepting, lets every request in flight finish and answer, then exits 0.

mibench's own per-request settings ride in an optional object `"mibench": {"mode": ...,
"mask": ..., "chunk_size": ..., "extend_batch_size": ..., ...}` (mibench's extension, not
SGLang's; validated against the jax mode registry, a bad one 400 naming `mibench.KEY`);
without it the command line's `--mode`/`--option` apply. The delimiter and the semantics
are the server's: SGLang's request has no field for them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import signal
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from mibench.engines import DTYPES, MODES, MibenchError

SCORE_KEYS = ("query", "items", "label_token_ids", "apply_softmax", "item_first", "model",
              "mibench")
# SGLang request keys mibench does not implement, with the value that means "unused"
UNSUPPORTED = {"embed_override_token_id": None, "query_embed_overrides": None,
               "item_embed_overrides": None, "return_pooled_hidden_states": False}
SEMANTICS = ("delimited", "plain")
MAX_BODY = 64 * 1024**2


class BadRequest(Exception):
    """A request the server refuses: 400 naming `field`."""

    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


@dataclasses.dataclass(frozen=True)
class Settings:
    """What the server scores with; `semantics` is passed to the engine only when given
    (None: the delimiter decides)."""

    model: str
    mode: str = "single"
    delimiter: int | None = None
    semantics: str | None = None
    dtype: str = "float32"
    tp: int = 1
    options: dict = dataclasses.field(default_factory=dict)

    @property
    def resolved_semantics(self) -> str:
        return self.semantics or ("plain" if self.delimiter is None else "delimited")

    def facts(self) -> dict:
        """The `mibench` entry of the model card."""
        return {"engine": "jax", "mode": self.mode, "delimiter": self.delimiter,
                "semantics": self.resolved_semantics, "dtype": self.dtype, "tp": self.tp,
                "options": dict(self.options)}


def error_body(message: str, field: str | None, code: int = 400) -> dict:
    """SGLang's ErrorResponse."""
    kind = "BadRequestError" if code < 500 else "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": field, "code": code}


def parse_overrides(value, settings: Settings | None) -> dict:
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
    if not isinstance(mode, str) or mode not in MODES["jax"]:
        raise BadRequest(f"unknown mode {mode!r} (known: {', '.join(MODES['jax'])})",
                         "mibench.mode")
    options = {k: v for k, v in value.items() if k != "mode"}
    if settings is not None and mode == settings.mode:
        options = {**settings.options, **options}
    try:
        MODES["jax"][mode].check(options)
    except MibenchError as e:
        message = str(e).removeprefix(f"{e.field}: ") if e.field else str(e)
        raise BadRequest(message, f"mibench.{e.field}" if e.field else "mibench") from None
    return {"mode": mode, **options}


def parse_request(raw: bytes, served: str, settings: Settings | None = None) -> tuple:
    """(query, items, label_token_ids, apply_softmax, overrides) of a /v1/score body
    (overrides: the engine keyword arguments of its `mibench` object, see parse_overrides);
    a BadRequest naming the field otherwise. Token ids and text are checked by the
    engine."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"not JSON: {str(e).splitlines()[0] if str(e) else e}",
                         "body") from None
    if not isinstance(data, dict):
        raise BadRequest(f"must be a JSON object (SGLang's ScoringRequest), got "
                         f"{type(data).__name__}", "body")
    unknown = [k for k in data if k not in SCORE_KEYS and k not in UNSUPPORTED]
    if unknown:
        raise BadRequest(f"unknown key (a /v1/score request has {', '.join(SCORE_KEYS)})",
                         str(unknown[0]))
    for key, unused in UNSUPPORTED.items():
        if data.get(key, unused) not in (unused, None):
            raise BadRequest("is not supported by mibench serve", key)
    for key in ("query", "items", "label_token_ids"):
        if data.get(key) is None:
            raise BadRequest("is required", key)
    for key in ("apply_softmax", "item_first"):
        if not isinstance(data.get(key, False), bool):
            raise BadRequest(f"must be true or false, got {data[key]!r}", key)
    if data.get("item_first"):
        raise BadRequest("true (the item before the query) is not supported: mibench "
                         "scores query + item", "item_first")
    model = data.get("model")
    if model is not None and model != served:
        raise BadRequest(f"this server serves {served!r}, not {model!r}", "model")
    overrides = parse_overrides(data.get("mibench"), settings)
    items = data["items"]
    return (data["query"], [items] if isinstance(items, str) else items,
            data["label_token_ids"], data.get("apply_softmax", False), overrides)


def build_app(engine, settings: Settings, served: str | None = None):
    """The FastAPI app scoring with `engine` (already loaded, see `prepare`)."""
    served = served or settings.model
    app = FastAPI(title="mibench serve", docs_url=None, redoc_url=None, openapi_url=None)
    # one worker thread with a FIFO queue: requests are scored one at a time, in the order
    # they arrived; none is dropped (the queue is unbounded), a waiting one waits
    queue = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibench-score")
    app.state.queue = queue
    kwargs = dict(mode=settings.mode, delimiter=settings.delimiter, **settings.options)
    if settings.semantics is not None:
        kwargs["semantics"] = settings.semantics
    created = int(time.time())
    cfg = engine.model_config

    def score(query, items, labels, apply_softmax, overrides):
        call = {**kwargs, **overrides} if overrides else kwargs
        if overrides and overrides["mode"] != settings.mode:
            call = {k: v for k, v in call.items() if k not in settings.options
                    or k in overrides}
        return engine.score(query, items, labels, apply_softmax=apply_softmax, **call)

    @app.post("/v1/score")
    async def score_endpoint(request: Request):
        try:
            raw = await request.body()
            if len(raw) > MAX_BODY:
                raise BadRequest(f"is larger than {MAX_BODY} bytes", "body")
            query, items, labels, softmax, overrides = parse_request(raw, served, settings)
            result = await asyncio.get_running_loop().run_in_executor(
                queue, score, query, items, labels, softmax, overrides)
        except BadRequest as e:
            return JSONResponse(error_body(str(e), e.field), status_code=400)
        except MibenchError as e:  # the engine's InputError names the field
            message = str(e).removeprefix(f"{e.field}: ") if e.field else str(e)
            return JSONResponse(error_body(message, e.field), status_code=400)
        except Exception as e:  # noqa: BLE001 - a server answers, it does not crash
            return JSONResponse(error_body(f"{type(e).__name__}: {e}", None, 500),
                                status_code=500)
        n = result.num_tokens
        return JSONResponse({"scores": result.scores, "model": served,
                             "usage": {"prompt_tokens": n, "completion_tokens": 0,
                                       "total_tokens": n},
                             "object": "scoring"})

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": served, "object": "model", "created": created, "owned_by": "mibench",
            "root": settings.model,
            "max_model_len": getattr(cfg, "max_position_embeddings", None),
            "mibench": settings.facts()}]}

    return app


def check_settings(settings: Settings) -> None:
    """Everything checkable before the weights load; a MibenchError naming the flag."""
    from mibench.engines import model_facts

    if settings.mode not in MODES["jax"]:
        raise MibenchError(f"unknown mode {settings.mode!r} for the jax engine (known: "
                           f"{', '.join(MODES['jax'])})", field="--mode")
    try:
        MODES["jax"][settings.mode].check(settings.options)
    except MibenchError as e:
        raise MibenchError(str(e), field="--option") from None
    if settings.semantics is not None and settings.semantics not in SEMANTICS:
        raise MibenchError(f"must be one of {', '.join(SEMANTICS)}, got "
                           f"{settings.semantics!r}", field="--semantics")
    if settings.dtype not in DTYPES:
        raise MibenchError(f"must be one of {', '.join(DTYPES)}, got {settings.dtype!r}",
                           field="--dtype")
    if settings.tp < 1:
        raise MibenchError(f"must be a positive integer, got {settings.tp}", field="--tp")
    facts = model_facts(settings.model)
    d = settings.delimiter
    if d is not None and not 0 <= d < facts.vocab_size:
        raise MibenchError(f"{d} is outside the vocabulary [0, {facts.vocab_size}) of "
                           f"{settings.model}", field="--delimiter")


def prepare(engine, settings: Settings) -> Settings:
    """Check the settings against the loaded engine and score one small request with them,
    so a bad combination (a packing mode without a delimiter, plain semantics the engine
    cannot score) is an error now, not a 400 on every request, and the first request is
    compiled. An engine whose `score` takes no `semantics` decides by the delimiter alone:
    then `--semantics` may only say what the delimiter already does."""
    takes = "semantics" in inspect.signature(engine.score).parameters
    if settings.semantics is not None and not takes:
        implied = "plain" if settings.delimiter is None else "delimited"
        if settings.semantics != implied:
            raise MibenchError(f"this engine takes no semantics setting: the delimiter "
                               f"decides ({implied} {'without' if implied == 'plain' else 'with'}"
                               f" one), so {settings.semantics} is not available",
                               field="--semantics")
        settings = dataclasses.replace(settings, semantics=None)
    ids = [t for t in range(8) if t != settings.delimiter]
    kwargs = dict(mode=settings.mode, delimiter=settings.delimiter, **settings.options)
    if settings.semantics is not None:
        kwargs["semantics"] = settings.semantics
    try:
        engine.score(ids[:3], [ids[3:5], ids[5:6]], [ids[0]], **kwargs)
    except MibenchError as e:
        flag = {"mode": "--mode", "delimiter": "--delimiter", "semantics": "--semantics"}
        message = str(e).removeprefix(f"{e.field}: ") if e.field else str(e)
        raise MibenchError(message, field=flag.get(e.field, "--option")) from None
    return settings


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one); a MibenchError naming --host or --port."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port < 65536:
        raise MibenchError(f"must be in 0..65535 (0: a free port), got {port!r}",
                           field="--port")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError) as e:
        raise MibenchError(f"cannot resolve {host!r}: {e}", field="--host") from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as e:
        sock.close()
        raise MibenchError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                           field="--port") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def _server(app, log_level: str = "warning"):
    import uvicorn

    return uvicorn.Server(uvicorn.Config(app, log_level=log_level, lifespan="off",
                                         access_log=False))


class Served:
    """An app served on 127.0.0.1 (a free port unless given) in a background thread, for
    tests and tools: `with Served(app) as s: ... s.url`; stopped on exit."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0):
        self.app, self.host, self.port = app, host, port

    def __enter__(self) -> Served:
        self.sock = bind(self.host, self.port)
        self.url = url_of(self.sock)
        self.server = _server(self.app)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]},
                                       daemon=True, name="mibench-serve")
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000) -> None:
    """`mibench serve`: check, bind, load the engine, warm it, serve until Ctrl-C."""
    from mibench.engines import load_engine

    check_settings(settings)
    sock = bind(host, port)  # before the weights load: a busy port fails fast
    try:
        engine = load_engine("jax", model=settings.model, dtype=settings.dtype, tp=settings.tp)
        settings = prepare(engine, settings)
        app = build_app(engine, settings)
        print(f"mibench serve: {settings.model} (jax {settings.mode}, {settings.dtype}, tp "
              f"{settings.tp}, delimiter {settings.delimiter}, "
              f"{settings.resolved_semantics}) on {url_of(sock)}  (POST /v1/score, GET "
              "/health, GET /v1/models; Ctrl-C stops)", file=sys.stderr, flush=True)
        # uvicorn's graceful shutdown on SIGINT/SIGTERM: stop accepting, wait for the
        # requests in flight to answer; then it re-raises the signal, which ends up here
        # (SIGTERM as SIGINT: exit 0 once drained)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            _server(app).run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        app.state.queue.shutdown(wait=True)
        print("mibench serve: stopped", file=sys.stderr, flush=True)
    finally:
        sock.close()

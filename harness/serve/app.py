"""`mibench serve`: the JAX engine behind an SGLang-compatible `POST /v1/score` (FastAPI,
uvicorn), for benchmarking it as a server and for testing the `http` engine.

Request body: SGLang's `ScoringRequest` (python/sglang/srt/entrypoints/openai/protocol.py),
parsed as SGLang does, with the differences and their reasons listed in
harness/serve/request.py (and docs/cli.md): `query` and `items` (token ids, or text),
`label_token_ids`, `apply_softmax`, `item_first` (true: `item + query`), any `model` name.

Response (SGLang's `ScoringResponse`): `{"scores": [[...], ...], "model": NAME, "usage":
{"prompt_tokens", "completion_tokens": 0, "total_tokens"}, "object": "scoring"}`, one row
per item and one column per label; NAME is the request's `model`, else the served name.
`prompt_tokens` counts the tokens the engine ran through the model (ScoreResult.num_tokens:
a prefix scored once per item counts once per item).

Errors use SGLang's `ErrorResponse`: `{"object": "error", "message": ..., "type": ...,
"param": FIELD, "code": STATUS}`, `param` naming the field (`query`, `items[3]`,
`label_token_ids`, `body`, `content-type`, ...). 400: a bad request; 408: its body did not
arrive in time; 413: over a limit of the deployment (items, tokens, estimated memory,
body size: harness/serve/limits.py), named in the message; 503: the queue is full, or the
engine ran out of memory on this request (the server goes on serving), or a request still
unfinished when --shutdown-timeout ends (uvicorn cancels it); 500: anything else
(scores that fail their check among it: the engine's fault, not the request's).
`GET /health` answers `{"status": "ok"}`; `GET /v1/models` lists the served model
(SGLang's ModelList) with a `mibench` entry: the mode, delimiter, semantics, dtype, tp,
options and limits it scores with, which the http engine checks its requests against.

Requests are parsed, and admitted or refused, off the event loop (which keeps accepting):
bodies up to LIGHT_BODY on one thread, larger ones on another, so a small request never
waits behind a large one; text is tokenized with --max-tokens as a budget, so a text past
it is refused after about that many tokens of work whatever its size (limits.tokenize).
Admitted ones are scored one at a time (the engine is not re-entrant), in the order they
arrived, with at most `--max-queue` waiting. SIGINT or SIGTERM stops accepting,
lets the requests in flight and those queued finish within `--shutdown-timeout`, then
exits 0; whatever the clients do, the process is gone within `--shutdown-timeout` +
SHUTDOWN_MARGIN_S (exit 1 when it had to leave a request unfinished).

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
import os
import socket
import sys
import threading
import time

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from mibench.engines import DTYPES, SEMANTICS, InvalidScores, MibenchError, engine_mode

from ..util import sigterm_as_ctrl_c
from .connections import MAX_HEADER_BYTES, guarded_protocol
from .limits import (
    Limits,
    Parsers,
    ScoringQueue,
    admit,
    out_of_memory,
    read_body,
    tokenize,
)
from .open_files import ListeningSocket, open_files
from .request import (
    BadRequest,
    ScoreCall,
    Scorer,
    check_content_type,
    parse_request,
)

# connections the kernel queues before they are accepted (uvicorn's default; the system
# caps it at net.core.somaxconn): at 128, a crowd reconnecting as fast as it is closed
# overflowed the queue, and a dropped connect is retried after 1 s, 3 s, 7 s
BACKLOG = 2048
SHUTDOWN_MARGIN_S = 5.0  # after --shutdown-timeout: uvicorn's cancelling and the exit
KIND = {400: "BadRequestError", 408: "RequestTimeoutError", 413: "RequestTooLargeError",
        503: "ServiceUnavailableError"}


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
    kind = KIND.get(code, "BadRequestError" if code < 500 else "InternalServerError")
    return {"object": "error", "message": message, "type": kind, "param": field, "code": code}


def error_response(message: str, field: str | None, code: int, close: bool) -> JSONResponse:
    """An error answer; `close` when the body was not read to its end (the connection is
    closed after it, lingering: harness/serve/limits.py)."""
    headers = {"connection": "close"} if close else {}
    if code == 503:
        headers["retry-after"] = "1"
    return JSONResponse(error_body(message, field, code), status_code=code, headers=headers)


def answer(scores: list, tokens: int, model: str) -> JSONResponse:
    """SGLang's ScoringResponse."""
    return JSONResponse({"scores": scores, "model": model,
                         "usage": {"prompt_tokens": tokens, "completion_tokens": 0,
                                   "total_tokens": tokens}, "object": "scoring"})


def build_app(engine, settings: Settings, served: str | None = None,
              limits: Limits | None = None):
    """The FastAPI app scoring with `engine` (already loaded, see `prepare`) within
    `limits` (default: Limits())."""
    from starlette.requests import ClientDisconnect

    served = served or settings.model
    limits = (limits or Limits()).resolved()
    app = FastAPI(title="mibench serve", docs_url=None, redoc_url=None, openapi_url=None)
    # requests are parsed and admitted off the event loop, in arrival order, on one of two
    # threads: bodies up to LIGHT_BODY on one, larger ones on the other, so a small request
    # never waits behind a large one's decoding and tokenizing; admitted ones are scored
    # on a third, one at a time, at most max_queue waiting
    parsers = Parsers()
    queue = ScoringQueue(limits.max_queue)
    app.state.queue, app.state.parser, app.state.limits = queue, parsers, limits
    scorer = Scorer(engine, settings)
    cfg = getattr(engine, "model_config", None)
    encode = engine.encode if getattr(engine, "tokenizer", None) is not None else None
    created = int(time.time())

    def accept(raw: bytes) -> ScoreCall:
        call = parse_request(raw, settings)
        if isinstance(call.items, list) and call.items:
            admit(tokenize(call, encode, limits.max_tokens), settings, limits, cfg)
        return call

    @app.post("/v1/score")
    async def score_endpoint(request: Request):
        read = False  # the body read to its end: the connection may be kept
        try:
            check_content_type(request.headers.get("content-type"))
            raw = await read_body(request, limits)
            read = True
            call = await asyncio.get_running_loop().run_in_executor(parsers.lane(raw), accept,
                                                                    raw)
            del raw
            if isinstance(call.items, list) and not call.items:  # SGLang: no items, no scores
                return answer([], 0, call.model or served)
            result = await asyncio.wrap_future(queue.submit(scorer, call))
        except BadRequest as e:
            return error_response(str(e), e.field, e.status, close=not read)
        except ClientDisconnect:
            return error_response("the client went away", "body", 400, close=True)
        except asyncio.CancelledError:  # uvicorn cancels what is left at --shutdown-timeout
            return error_response(
                "this server is shutting down (SIGTERM or SIGINT) and this request did not "
                f"finish within its --shutdown-timeout of {limits.shutdown_timeout:g} s; send "
                "it again to a running server", None, 503, close=True)
        except InvalidScores as e:  # the engine's fault, not the request's
            return error_response(f"the engine returned scores that cannot be right: {e}",
                                  None, 500, close=False)
        except MibenchError as e:  # the engine's InputError names the field
            return error_response(e.message, e.field, 400, close=False)
        except Exception as e:  # noqa: BLE001 - a server answers, it does not crash
            if out_of_memory(e):
                return error_response(
                    f"the engine ran out of memory on this request ({type(e).__name__}: "
                    f"{str(e)[:300]}); this server goes on serving: send fewer or shorter "
                    "items, or lower --max-request-memory so that such requests are refused "
                    "before they run", None, 503, close=False)
            return error_response(f"{type(e).__name__}: {str(e)[:1000]}", None, 500,
                                  close=False)
        return answer(result.scores, result.num_tokens, call.model or served)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/get_server_info")
    async def server_info():
        """SGLang's server-info endpoint: what this server is and scores with."""
        from ..host.provenance import mibench_version

        return {"server": "mibench serve", "version": mibench_version(),
                "model_path": settings.model, "served_model_name": served,
                **{k: v for k, v in settings.facts().items() if k != "options"},
                **{f"option_{k}": v for k, v in settings.options.items()},
                **{f"limit_{k}": v for k, v in limits.describe().items()}}

    @app.get("/v1/models")
    async def models():
        return {"object": "list", "data": [{
            "id": served, "object": "model", "created": created, "owned_by": "mibench",
            "root": settings.model,
            "max_model_len": getattr(cfg, "max_position_embeddings", None),
            "mibench": {**settings.facts(), "limits": limits.describe()}}]}

    return app


def check_settings(settings: Settings) -> None:
    """Everything checkable before the weights load; a MibenchError naming the flag."""
    from mibench.engines import model_facts

    try:
        mode = engine_mode("jax", settings.mode)
    except MibenchError as e:
        raise e.under("--mode") from None
    try:
        mode.check(settings.options)
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
        raise e.under(flag.get(e.field, "--option"), MibenchError) from None
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
    sock = ListeningSocket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError as e:
        sock.close()
        raise MibenchError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                           field="--port") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def _server(app, log_level: str = "warning", watchdog: bool = False, loop: str = "auto"):
    """uvicorn serving `app` within its limits (app.state.limits, else the defaults):
    keep-alive, graceful shutdown and header size by uvicorn's options, the rest by
    `guarded_protocol`. `watchdog`: from the first SIGINT/SIGTERM the process exits within
    shutdown_timeout + SHUTDOWN_MARGIN_S whatever its clients do (the command's process).
    `loop`: uvicorn's (auto: uvloop where it is installed, else asyncio's)."""
    import uvicorn

    limits = getattr(app.state, "limits", None) or Limits().resolved()
    config = uvicorn.Config(app, log_level=log_level, lifespan="off", access_log=False, loop=loop,
                            http=guarded_protocol(limits), timeout_keep_alive=limits.keep_alive,
                            timeout_graceful_shutdown=limits.shutdown_timeout,
                            h11_max_incomplete_event_size=MAX_HEADER_BYTES)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            if watchdog and not self.should_exit:
                bound = limits.shutdown_timeout + SHUTDOWN_MARGIN_S
                timer = threading.Timer(bound, _hard_exit, args=(bound,))
                timer.daemon = True
                timer.start()
            super().handle_exit(sig, frame)

    return Server(config)


def _hard_exit(bound: float) -> None:
    print(f"mibench serve: still not stopped {bound:g} s after the signal; exiting now, "
          "requests unfinished", file=sys.stderr, flush=True)
    os._exit(1)


class Served:
    """An app served on 127.0.0.1 (a free port unless given) in a background thread, for
    tests and tools: `with Served(app) as s: ... s.url`; stopped on exit."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, loop: str = "auto"):
        self.app, self.host, self.port, self.loop = app, host, port, loop

    def __enter__(self) -> Served:
        self.sock = bind(self.host, self.port)
        self.url = url_of(self.sock)
        self.server = _server(self.app, loop=self.loop)
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


def serve(settings: Settings, host: str = "127.0.0.1", port: int = 8000,
          limits: Limits | None = None) -> None:
    """`mibench serve`: check, bind, load the engine, warm it, serve until SIGINT/SIGTERM
    (module docstring: how it stops, and within what time)."""
    from mibench.engines import load_engine

    check_settings(settings)
    limits = (limits or Limits()).resolved()  # before the weights load: bad flags fail fast
    files, need = open_files(limits.max_connections)
    sock = bind(host, port)  # before the weights load: a busy port fails fast
    try:
        engine = load_engine("jax", model=settings.model, dtype=settings.dtype, tp=settings.tp)
        settings = prepare(engine, settings)
        app = build_app(engine, settings, limits=limits)
        print(f"mibench serve: {settings.model} (jax {settings.mode}, {settings.dtype}, tp "
              f"{settings.tp}, delimiter {settings.delimiter}, "
              f"{settings.resolved_semantics}) on {url_of(sock)}  (POST /v1/score, GET "
              f"/health, GET /v1/models; Ctrl-C stops)\nmibench serve: limits "
              f"{limits.summary()}; open files {files} (connections need at most {need})",
              file=sys.stderr, flush=True)
        print(url_of(sock), flush=True)  # stdout: the address alone, for scripts to read
        # uvicorn's graceful shutdown on SIGINT/SIGTERM: stop accepting, wait for the
        # requests in flight to answer (at most shutdown_timeout); then it re-raises the
        # signal, which ends up here (SIGTERM as SIGINT)
        sigterm_as_ctrl_c()
        try:
            _server(app, watchdog=True).run(sockets=[sock])
        except KeyboardInterrupt:
            pass
        app.state.parser.shutdown(wait=False, cancel_futures=True)
        if not app.state.queue.stop(SHUTDOWN_MARGIN_S):
            _hard_exit(limits.shutdown_timeout + SHUTDOWN_MARGIN_S)
        print("mibench serve: stopped", file=sys.stderr, flush=True)
    finally:
        sock.close()

"""`mibench serve --model M`: the JAX engine behind an SGLang-compatible `POST /v1/score`
(the server itself: harness/serve/app.py) until Ctrl-C or SIGTERM, within the limits a
deployment sets (harness/serve/limits.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from mibench.engines import MODES, SEMANTICS

from ..serve.limits import Limits as ServeLimits  # `serve`'s defaults
from .common import (
    DtypeName,
    choices,
    guarded,
    parse_options,
)


@guarded
def serve(
    model: Annotated[str, typer.Option(help="Model: a checkpoint folder or "
                                            "embedded:<preset>; also the served name.")],
    mode: Annotated[str, typer.Option(metavar=choices(MODES["jax"]),
                                      help="The jax engine's mode.")] = "single",
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    semantics: Annotated[str | None, typer.Option(
        metavar=choices(SEMANTICS),
        help="delimited or plain; default: delimited with --delimiter, else plain.")] = None,
    dtype: DtypeName = "float32", tp: int = 1,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 8000,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
    max_items: Annotated[int, typer.Option(help="Items per request, at most (413 past "
                                                "it).")] = ServeLimits.max_items,
    max_tokens: Annotated[int, typer.Option(help="Tokens a request runs through the model "
                                                 "(usage.prompt_tokens), at most.")] =
        ServeLimits.max_tokens,
    max_request_memory: Annotated[str, typer.Option(
        help="Estimated memory of one request, at most (validate's estimator, device "
             "working set included), e.g. 4GiB; auto: 8GiB or a third of this machine's "
             "memory, whichever is less.")] = "auto",
    max_queue: Annotated[int, typer.Option(help="Requests admitted and not yet answered, "
                                                "at most (503 past it).")] =
        ServeLimits.max_queue,
    max_body: Annotated[str, typer.Option(help="Request body, at most (413 from "
                                               "Content-Length or while it arrives).")] =
        f"{ServeLimits.max_body // 1024**2}MiB",
    max_connections: Annotated[int, typer.Option(help="Open connections, at most (the next "
                                                      "is answered 503 and closed).")] =
        ServeLimits.max_connections,
    header_timeout: Annotated[float, typer.Option(help="Seconds for a request's headers to "
                                                       "arrive (408 past it).")] =
        ServeLimits.header_timeout,
    body_timeout: Annotated[float, typer.Option(help="Seconds for a request's body to "
                                                     "arrive (408 past it).")] =
        ServeLimits.body_timeout,
    keep_alive: Annotated[float, typer.Option(help="Seconds an idle keep-alive connection "
                                                   "is kept.")] = ServeLimits.keep_alive,
    shutdown_timeout: Annotated[float, typer.Option(
        help="Seconds the requests in flight get after SIGTERM/SIGINT; the process is gone "
             "5 s after that whatever clients do.")] = ServeLimits.shutdown_timeout,
):
    """The JAX engine behind an SGLang-compatible POST /v1/score (GET /health, GET
    /v1/models, GET /get_server_info) until Ctrl-C or SIGTERM, within the limits a
    deployment sets."""
    from ..serve import Settings
    from ..serve import serve as serve_forever
    from ..serve.limits import parse_size

    memory = None if max_request_memory == "auto" else parse_size(max_request_memory,
                                                                  "--max-request-memory")
    limits = ServeLimits(max_items=max_items, max_tokens=max_tokens, max_request_memory=memory,
                         max_queue=max_queue, max_body=parse_size(max_body, "--max-body"),
                         max_connections=max_connections, header_timeout=header_timeout,
                         body_timeout=body_timeout, keep_alive=keep_alive,
                         shutdown_timeout=shutdown_timeout)
    serve_forever(Settings(model=model, mode=mode, delimiter=delimiter, semantics=semantics,
                           dtype=dtype, tp=tp, options=parse_options(option or [])),
                  host=host, port=port, limits=limits)

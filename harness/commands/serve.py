"""`mibench serve --model M`: the JAX engine behind an SGLang-compatible `POST /v1/score`
(the server itself: harness/serve.py) until Ctrl-C or SIGTERM."""

from __future__ import annotations

from typing import Annotated

import typer

from mibench.harness.commands.common import guarded, parse_options


@guarded
def serve(
    model: Annotated[str, typer.Option(help="Model: a checkpoint folder or "
                                            "embedded:<preset>; also the served name.")],
    mode: Annotated[str, typer.Option(help="The jax engine's mode.")] = "single",
    delimiter: Annotated[int | None, typer.Option(help="Delimiter token id.")] = None,
    semantics: Annotated[str | None, typer.Option(
        help="delimited or plain; default: delimited with --delimiter, else plain.")] = None,
    dtype: str = "float32", tp: int = 1,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: a free one).")] = 8000,
    option: Annotated[list[str] | None, typer.Option(
        help="Mode option key=value, e.g. mask=segment (repeat).")] = None,
):
    """The JAX engine behind an SGLang-compatible POST /v1/score (GET /health, GET
    /v1/models) until Ctrl-C."""
    from mibench.harness.serve import Settings
    from mibench.harness.serve import serve as serve_forever

    serve_forever(Settings(model=model, mode=mode, delimiter=delimiter, semantics=semantics,
                           dtype=dtype, tp=tp, options=parse_options(option or [])),
                  host=host, port=port)

"""`mibench serve`: the JAX engine behind an SGLang-compatible `POST /v1/score`, one module
per concern: the app and its lifecycle (`app`), SGLang's request forms parsed and checked
(`request`), admission limits and the memory estimate (`limits`), connections that cannot
be held open by a slow or hostile client (`connections`). The app's names load on first
use, so the `serve` command's option defaults (`limits`) import no web framework."""

from __future__ import annotations

import importlib

_APP = ("SHUTDOWN_MARGIN_S", "Served", "Settings", "build_app", "prepare", "serve")
__all__ = list(_APP)


def __getattr__(name: str):
    if name not in _APP:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.app"), name)

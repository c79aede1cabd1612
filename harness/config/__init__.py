"""Configs: YAML read with locations (`yamlsource`), validated into typed models (`spec`,
built from the mode registry), expanded into cases (`matrix`, `cases`), all at the edge
(`load`). The names below load on first use, so a worker that needs only `cases` (to
unpickle a CaseSpec) imports nothing else of the config machinery."""

from __future__ import annotations

import importlib

_LAZY = {"load_config": "load", "CaseSpec": "cases", "expand": "matrix", "Config": "spec",
         "ConfigError": "yamlsource"}

__all__ = ["CaseSpec", "Config", "ConfigError", "expand", "load_config"]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
    return getattr(module, name)

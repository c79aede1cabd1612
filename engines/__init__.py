"""Scoring engines: the JAX engine (every mode) and the PyTorch reference (the parity oracle).

    from . import load_engine
    engine = load_engine("jax", model="embedded:tiny", dtype="float32", tp=1)
    result = engine.score(query, items, label_token_ids, mode="single", delimiter=151643)
    result.scores  # one row per item, one column per label

This module is the engines' whole public surface: the harness imports nothing else from
`mibench.engines` (tests/test_layering.py). Importing it stays light (no jax, no torch):
the names below that need them load on first use.
"""

from __future__ import annotations

import importlib

from mibench.errors import (
    InputError,
    InvalidScores,
    MibenchError,
    ModelError,
    ServerUnavailable,
    TextTooLong,
    TopologyUnavailable,
    Unavailable,
)

from .contract import Engine
from .modes.accounting import PART_OPTION, Shape
from .modes.options import OPTIONS, Option
from .modes.registry import (
    AUTO_DENSE_MAX_T,
    MODES,
    Mode,
    engine_mode,
    engine_modes,
)
from .request import SEMANTICS  # an item read after `query + [delimiter]`, or `query`
from .result import ScoreResult

ENGINES = tuple(MODES)
DTYPES = ("float32", "bfloat16")


# public name -> (module under mibench.engines, attribute): loaded on first use
_LAZY = {
    "env_info": ("env", "env_info"),
    "skip_absent_tpu": ("platforms", "skip_absent_tpu"),  # libtpu installed, no TPU
    "accelerators": ("platforms", "accelerators"),  # TPU/GPU chips here, JAX not started
    "package_versions": ("env", "package_versions"),
    "ModelConfig": ("config", "ModelConfig"),
    "model_facts": ("facts", "model_facts"),
    "TextBound": ("text", "TextBound"),  # a text within its model's positions, bounded
    "pieces": ("text", "pieces"),  # a long text in pieces cut where a word starts
    "PIECE_CHARS": ("text", "PIECE_CHARS"),
    "make_model": ("embedded", "make_model"),
    "PRESETS": ("presets", "PRESETS"),  # the embedded presets by name (plain data)
    "cache_dir": ("model_cache", "cache_dir"),
    "verify_model": ("checkpoint", "verify_model"),
    "model_folder": ("checkpoint", "resolve_model"),  # a model's checkpoint folder, made
    "init_distributed": ("distributed", "initialize"),
    "is_writer": ("distributed", "is_writer"),
    "count_compiles": ("modes.compiles", "count_compiles"),
    "host_memory": ("memory", "host_memory"),  # this machine's RAM or cgroup limit
    "HARD_LIMIT": ("memory", "HARD_LIMIT"),
    "stage_profile": ("profile", "prefill_extend_stages"),
    "top_kernels": ("profile", "top_kernels"),
    "cudnn_check": ("profile", "cudnn_check"),
    "HttpClient": ("http_client", "HttpClient"),  # the http engine's transport
    "leaking": ("leaks", "leaking"),  # deliberate leaks: invariance's negative controls
    "parse_base_url": ("http_client", "parse_base_url"),
    "wire": ("wires", "wire"),  # a server wire by name (engines/wires/)
    "WIRES": ("wires", "WIRES"),
    "fact_problem": ("wires", "fact_problem"),
    # `mibench compile`: the engine's programs compiled for a TPU slice without a TPU
    "TPU_TARGETS": ("tpu", "TPU_TARGETS"),
    "COST_LOOPS": ("compile", "COST_LOOPS"),
    "UNROLLED_ENV": ("compile", "UNROLLED_ENV"),
    "tpu_target": ("tpu", "tpu_target"),
    "abstract_engine": ("tpu", "abstract_engine"),
    "compile_case": ("compile", "compile_case"),
}

__all__ = ["AUTO_DENSE_MAX_T", "DTYPES", "ENGINES", "MODES", "OPTIONS", "PART_OPTION", "Engine",
           "InputError", "InvalidScores", "MibenchError", "Mode", "ModelError", "Option",
           "SEMANTICS", "ScoreResult", "Shape", "ServerUnavailable", "TextTooLong",
           "TopologyUnavailable", "Unavailable", "engine_mode", "engine_modes", "load_engine",
           *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mibench.engines' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(f"mibench.engines.{module}"), attr)
    globals()[name] = value
    return value


def load_engine(name: str, model: str = "embedded:tiny", dtype: str = "float32",
                tp: int = 1, **server) -> Engine:
    """Build an engine. `model` is a checkpoint folder or `embedded:<preset>`. The `http`
    engine also takes `base_url`, `served_model` and `timeout_s` (engines/http_engine.py)."""
    engine_modes(name)  # an unknown engine: a MibenchError naming `engine`
    if dtype not in DTYPES:
        raise MibenchError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})", field="dtype")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise MibenchError(f"must be a positive integer, got {tp!r}", field="tp")
    if server and name != "http":
        raise MibenchError(f"only the http engine takes {sorted(server)}", field=next(iter(server)))
    if name == "http":
        from .http_engine import HttpEngine

        return HttpEngine(model, dtype=dtype, tp=tp, **server)
    from .platforms import skip_absent_tpu

    skip_absent_tpu()  # before JAX starts: no libtpu noise on a machine without a TPU
    if name == "jax":
        from .jax_engine import JaxEngine

        return JaxEngine(model, dtype=dtype, tp=tp)
    from .torch_engine import TorchEngine

    return TorchEngine(model, dtype=dtype, tp=tp)

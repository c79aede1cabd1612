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
from mibench.registry import Registry

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

# engine name -> its class (`Engine`, engines/contract.py), imported when built: the same
# names in the same order as MODES (tests/test_docs_design.py)
ENGINES: Registry[type[Engine]] = Registry("engine", field="engine")
ENGINES.add("jax", "mibench.engines.jax_engine:JaxEngine")
ENGINES.add("torch", "mibench.engines.torch_engine:TorchEngine")
ENGINES.add("http", "mibench.engines.http_engine:HttpEngine")
# engine name -> the distributions it runs on, beside its registry line as plain data (no
# engine imported to read them): the versions a record keeps (engines/env.py) and the
# packages `mibench job gpu` checks are installed; the same names as ENGINES
ENGINE_PACKAGES = {"jax": ("jax", "jaxlib", "flax"), "torch": ("torch", "transformers"),
                   "http": ()}
DTYPES = ("float32", "bfloat16")


# public name -> "module:attribute" under mibench.engines: loaded on first use
_LAZY: Registry[object] = Registry("name")
_LAZY.add("env_info", "mibench.engines.env:env_info")
# libtpu installed, no TPU
_LAZY.add("skip_absent_tpu", "mibench.engines.platforms:skip_absent_tpu")
# TPU/GPU chips here, JAX not started
_LAZY.add("accelerators", "mibench.engines.platforms:accelerators")
_LAZY.add("package_versions", "mibench.engines.env:package_versions")
_LAZY.add("ModelConfig", "mibench.engines.config:ModelConfig")
_LAZY.add("model_facts", "mibench.engines.facts:model_facts")
# a text within its model's positions, bounded
_LAZY.add("TextBound", "mibench.engines.text:TextBound")
_LAZY.add("pieces", "mibench.engines.text:pieces")  # a long text in pieces cut where a word starts
_LAZY.add("PIECE_CHARS", "mibench.engines.text:PIECE_CHARS")
_LAZY.add("make_model", "mibench.engines.embedded:make_model")
_LAZY.add("PRESETS", "mibench.engines.presets:PRESETS")  # the embedded presets by name (plain data)
_LAZY.add("cache_dir", "mibench.engines.model_cache:cache_dir")
_LAZY.add("verify_model", "mibench.engines.checkpoint:verify_model")
# a model's checkpoint folder, made
_LAZY.add("model_folder", "mibench.engines.checkpoint:resolve_model")
_LAZY.add("init_distributed", "mibench.engines.distributed:initialize")
_LAZY.add("is_writer", "mibench.engines.distributed:is_writer")
_LAZY.add("count_compiles", "mibench.engines.modes.compiles:count_compiles")
_LAZY.add("host_memory", "mibench.engines.memory:host_memory")  # this machine's RAM or cgroup limit
_LAZY.add("HARD_LIMIT", "mibench.engines.memory:HARD_LIMIT")
_LAZY.add("stage_profile", "mibench.engines.profile:prefill_extend_stages")
_LAZY.add("top_kernels", "mibench.engines.profile:top_kernels")
_LAZY.add("cudnn_check", "mibench.engines.profile:cudnn_check")
_LAZY.add("HttpClient", "mibench.engines.http_client:HttpClient")  # the http engine's transport
# deliberate leaks: invariance's negative controls
_LAZY.add("leaking", "mibench.engines.leaks:leaking")
_LAZY.add("parse_base_url", "mibench.engines.http_client:parse_base_url")
_LAZY.add("wire", "mibench.engines.wires:wire")  # a server wire by name (engines/wires/)
_LAZY.add("WIRES", "mibench.engines.wires:WIRES")
_LAZY.add("fact_problem", "mibench.engines.wires:fact_problem")
# `mibench compile`: the engine's programs compiled for a TPU slice without a TPU
_LAZY.add("TPU_TARGETS", "mibench.engines.tpu:TPU_TARGETS")
_LAZY.add("COST_LOOPS", "mibench.engines.compile:COST_LOOPS")
_LAZY.add("UNROLLED_ENV", "mibench.engines.compile:UNROLLED_ENV")
_LAZY.add("tpu_target", "mibench.engines.tpu:tpu_target")
_LAZY.add("abstract_engine", "mibench.engines.tpu:abstract_engine")
_LAZY.add("compile_case", "mibench.engines.compile:compile_case")

__all__ = ["AUTO_DENSE_MAX_T", "DTYPES", "ENGINES", "ENGINE_PACKAGES", "MODES", "OPTIONS",
           "PART_OPTION", "Engine", "InputError", "InvalidScores", "MibenchError", "Mode",
           "ModelError", "Option",
           "SEMANTICS", "ScoreResult", "Shape", "ServerUnavailable", "TextTooLong",
           "TopologyUnavailable", "Unavailable", "engine_mode", "engine_modes", "load_engine",
           *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'mibench.engines' has no attribute {name!r}")
    globals()[name] = value = _LAZY[name]
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
    if name != "http":
        from .platforms import skip_absent_tpu

        skip_absent_tpu()  # before JAX starts: no libtpu noise on a machine without a TPU
    return ENGINES[name](model, dtype=dtype, tp=tp, **server)

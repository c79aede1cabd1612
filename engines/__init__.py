"""Scoring engines: the JAX engine (every mode) and the PyTorch reference (the parity oracle).

    from mibench.engines import load_engine
    engine = load_engine("jax", model="embedded:tiny", dtype="float32", tp=1)
    result = engine.score(query, items, label_token_ids, mode="single", delimiter=151643)
    result.scores  # one row per item, one column per label
"""

from __future__ import annotations

from mibench.engines.errors import InputError, MibenchError, ModelError, TopologyUnavailable
from mibench.engines.result import ScoreResult

ENGINES = ("jax", "torch")
DTYPES = ("float32", "bfloat16")

__all__ = ["ENGINES", "DTYPES", "InputError", "MibenchError", "ModelError", "ScoreResult",
           "TopologyUnavailable", "env_info", "load_engine"]


def env_info() -> dict:
    """JAX devices (platform, kind, count) and package versions."""
    from mibench.engines.env import env_info as _env_info

    return _env_info()


def load_engine(name: str, model: str = "embedded:tiny", dtype: str = "float32", tp: int = 1):
    """Build an engine. `model` is a checkpoint folder or `embedded:<preset>`."""
    if name not in ENGINES:
        raise MibenchError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})", field="engine")
    if dtype not in DTYPES:
        raise MibenchError(f"unknown dtype {dtype!r} (known: {', '.join(DTYPES)})", field="dtype")
    if not isinstance(tp, int) or tp < 1:
        raise MibenchError(f"must be a positive integer, got {tp!r}", field="tp")
    if name == "jax":
        from mibench.engines.jax_engine import JaxEngine

        return JaxEngine(model, dtype=dtype, tp=tp)
    from mibench.engines.torch_engine import TorchEngine

    return TorchEngine(model, dtype=dtype, tp=tp)

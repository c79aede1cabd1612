"""Tensor parallelism declared in one place: the mesh, the weight layout, the KV-head fit.

Layout (Megatron style, one mesh axis "tp"): q, k, v, gate and up projections are split by
output columns, o and down projections by input rows, biases with their columns; the
embedding (which is also the tied LM head), the LM head and the norms are replicated, so
the token gather and the few scored rows through the head need no collective. A dimension
that the tp size does not divide stays replicated (correct, only less parallel): e.g. the
`tiny` preset's 4 query heads at tp 8. When the KV heads do not divide by tp, each is
repeated r times (K' = K * r, the smallest multiple that tp divides while K' <= N), as
serving engines do, which leaves every query head reading the same keys and values.
Activations and the KV cache follow the weights through XLA's sharding propagation; their
layouts are named below (bonsai's way: the letters are the axes, B batch, T tokens, D
hidden, N query heads, K KV heads, H head dim, F MLP hidden, L layers, P prefix), and a test
checks that what comes out of the compiled programs is placed so (tests/test_placement.py).
No explicit constraint pins them yet: correct everywhere, to be pinned where a TPU profile
shows resharding.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from mibench.errors import TopologyUnavailable

from .config import ModelConfig

AXIS = "tp"

# named layouts over the mesh axis (PartitionSpecs; without a mesh nothing is sharded)
ACT_BTD = PartitionSpec()  # hidden states between layers: replicated
ACT_BTNH = PartitionSpec(None, None, AXIS, None)  # queries (keys, values: BTKH) by head
ACT_BTN = PartitionSpec(None, None, AXIS)  # per-head row statistics (log-sum-exp) by head
REPLICATED = PartitionSpec()
ACT_BTF = PartitionSpec(None, None, AXIS)  # the MLP's gate and up activations by column
KV_L1PKH = PartitionSpec(None, None, None, AXIS, None)  # the prefix KV cache by KV head


# stacked layer weight [L, ...] -> the array axis split over "tp" (wq [L, D, N*H]: 2)
LAYER_SPLIT = {"wq": 2, "wk": 2, "wv": 2, "w_gate": 2, "w_up": 2, "bq": 1, "bk": 1, "bv": 1,
               "wo": 1, "w_down": 1}


@dataclasses.dataclass(frozen=True)
class ShardConfig:
    """The mesh an engine runs on; `mesh` None means one device, nothing sharded."""

    mesh: Mesh | None = None

    @property
    def tp(self) -> int:
        return 1 if self.mesh is None else self.mesh.size

    def describe(self) -> dict:
        if self.mesh is None:
            d = jax.devices()[0]
            return {"tp": 1, "mesh_shape": {AXIS: 1},
                    "devices": [{"id": d.id, "kind": d.device_kind}]}
        return {"tp": self.tp, "mesh_shape": dict(self.mesh.shape),
                "devices": [{"id": d.id, "kind": d.device_kind, "process": d.process_index}
                            for d in self.mesh.devices.flat]}


def make_shard_config(tp: int) -> ShardConfig:
    """A 1-D mesh over the first `tp` devices of every process; tp 1 is no mesh at all."""
    devices = jax.devices()
    if tp > len(devices):
        raise TopologyUnavailable(f"tp={tp} needs {tp} devices, only {len(devices)} "
                                  f"{devices[0].platform} device(s) exist", field="topology.tp")
    if tp == 1:
        return ShardConfig()
    return ShardConfig(Mesh(np.array(devices[:tp]), (AXIS,)))


def kv_repeat(cfg: ModelConfig, tp: int) -> int:
    """How many times each KV head is repeated so that tp divides the KV heads."""
    k, n = cfg.num_kv_heads, cfg.num_heads
    if k % tp == 0:
        return 1
    r = tp // math.gcd(k, tp)
    return r if k * r <= n and n % (k * r) == 0 else 1


def fit_kv_heads(cfg: ModelConfig, params: dict, tp: int) -> tuple[ModelConfig, dict]:
    """Repeat each KV head's k/v columns (and biases) r times; keeps every score unchanged:
    query head n reads kv head n // (N / K'), the r-th copy of its original kv head."""
    r = kv_repeat(cfg, tp)
    if r == 1:
        return cfg, params
    h = cfg.head_dim
    layers = dict(params["layers"])
    for key in ("wk", "wv", "bk", "bv"):
        if key in layers:
            w = layers[key]  # [L, (D,) K*H]
            heads = w.reshape(*w.shape[:-1], cfg.num_kv_heads, h)
            layers[key] = np.repeat(heads, r, axis=-2).reshape(*w.shape[:-1], -1)
    new_cfg = dataclasses.replace(cfg, num_kv_heads=cfg.num_kv_heads * r)
    return new_cfg, {**params, "layers": layers}


def _spec(shape: tuple[int, ...], axis: int | None, tp: int) -> PartitionSpec:
    if axis is None or shape[axis] % tp:
        return PartitionSpec()
    return PartitionSpec(*[AXIS if i == axis else None for i in range(len(shape))])


def param_specs(params: dict, tp: int) -> dict:
    """PartitionSpecs for the engine's parameter pytree (see the module docstring)."""
    specs = {k: PartitionSpec() for k in params if k != "layers"}
    specs["layers"] = {k: _spec(v.shape, LAYER_SPLIT.get(k), tp)
                       for k, v in params["layers"].items()}
    return specs


def place_params(params: dict, dtype, shard: ShardConfig) -> dict:
    """Cast the host (numpy) parameters to `dtype` and place them: on the default device
    without a mesh, else each process places its own shards of the same host copy."""
    specs = param_specs(params, shard.tp)

    def place(x, spec):
        x = np.asarray(x).astype(dtype, copy=False)
        if shard.mesh is None:
            return jax.device_put(x)
        return jax.make_array_from_callback(x.shape, NamedSharding(shard.mesh, spec),
                                            lambda idx: x[idx])

    return jax.tree.map(place, params, specs)


def to_host(x) -> np.ndarray:
    """A result as a host array, gathered from every process when it spans several."""
    if getattr(x, "is_fully_addressable", True):
        return np.asarray(x)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))

"""TPU slices to compile for, and a JAX engine for one without weights (`mibench compile`,
engines/compile.py).

`tpu_target("v6e-4")` names a slice (kind, chips, the topology name of
`jax.experimental.topologies`); `target_devices` gives its compile-only TPU devices (needs
libtpu). `abstract_engine(model, dtype, tp, target)` is a `JaxEngine` on those devices whose
parameters are `jax.ShapeDtypeStruct`s sharded as `place_params` shards the real ones: the
real engine's request and option checks, attention choice (platform `tpu`) and scorers,
from the model's shapes alone. Importing this module is light (no jax).
"""

from __future__ import annotations

import dataclasses
import functools
import re

from mibench.errors import MibenchError, TopologyUnavailable

# chips -> topology shape, for the kinds whose compile-only topology has one device per
# chip (v4's has one per TensorCore, not the megacore device JAX runs v4 with: not offered)
_SHAPES_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16",
              256: "16x16"}
_SHAPES_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8"}
TPU_KINDS = {"v6e": _SHAPES_2D, "v5e": _SHAPES_2D, "v5p": _SHAPES_3D}
TPU_TARGETS = tuple(f"{kind}-{n}" for kind, shapes in TPU_KINDS.items() for n in shapes)

@dataclasses.dataclass(frozen=True)
class TpuTarget:
    """A TPU slice to compile for: `v6e-4` is 4 v6e chips (N counts chips for every kind;
    Google names v5p slices by TensorCores, so its v5p-8 is `v5p-4` here)."""

    name: str
    kind: str
    chips: int
    topology: str  # the topology name of jax.experimental.topologies, e.g. "v6e:2x2"


def tpu_target(name) -> TpuTarget:
    """The target called `name` (`KIND-CHIPS`), or a MibenchError naming `target`."""
    m = re.fullmatch(r"(v\d+[a-z]*)-(\d+)", name) if isinstance(name, str) else None
    if m is None or m[1] not in TPU_KINDS or int(m[2]) not in TPU_KINDS[m[1]]:
        known = ", ".join(f"{k}-{{{','.join(map(str, s))}}}" for k, s in TPU_KINDS.items())
        raise MibenchError(f"unknown TPU target {name!r} (known: {known}; the number counts "
                           "chips)", field="target")
    kind, chips = m[1], int(m[2])
    return TpuTarget(name, kind, chips, f"{kind}:{TPU_KINDS[kind][chips]}")


@functools.cache
def target_devices(name: str) -> tuple:
    """The compile-only TPU devices of a target (needs libtpu; see the module doc)."""
    from jax.experimental import topologies

    t = tpu_target(name)
    kwargs = {"chips_per_host_bounds": (1, 1, 1)} if t.chips == 1 else {}
    try:
        topo = topologies.get_topology_desc(topology_name=t.topology, platform="tpu",
                                            **kwargs)
    except RuntimeError as e:
        raise MibenchError(f"cannot make the {t.topology} topology: {_first_line(e)}",
                           field="libtpu") from None
    devices = tuple(topo.devices)
    if len(devices) != t.chips:
        raise MibenchError(f"{t.topology} gave {len(devices)} devices for {t.chips} chips",
                           field="target")
    return devices


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


# ---- abstract parameters and the engine without weights ----------------------------------


def abstract_params(cfg, dtype, shard, device) -> dict:
    """The engine's parameter pytree as ShapeDtypeStructs, sharded as `place_params` places
    the real ones (one device without a mesh, else `param_specs` on the mesh)."""
    import jax
    from jax.sharding import NamedSharding, SingleDeviceSharding

    from .checkpoint import LAYER_TABLE, layer_keys
    from .sharding import param_specs

    shapes = {"embed": (cfg.vocab_size, cfg.hidden_size), "final_norm": (cfg.hidden_size,),
              "layers": {k: (cfg.num_layers, *LAYER_TABLE[k][2](cfg)) for k in layer_keys(cfg)}}
    if not cfg.tie_word_embeddings:
        shapes["lm_head"] = (cfg.vocab_size, cfg.hidden_size)
    is_shape = lambda x: isinstance(x, tuple)  # noqa: E731
    bare = jax.tree.map(lambda s: jax.ShapeDtypeStruct(s, dtype), shapes, is_leaf=is_shape)
    specs = param_specs(bare, shard.tp)

    def place(x, spec):
        sharding = (SingleDeviceSharding(device) if shard.mesh is None
                    else NamedSharding(shard.mesh, spec))
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=sharding)

    return jax.tree.map(place, bare, specs)


def abstract_engine(model: str, dtype: str, tp: int, target: str):
    """A JaxEngine on the target's first `tp` devices whose weights are abstract: the real
    engine's request checks, option checks, attention choice (platform `tpu`) and scorers."""
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh

    from .facts import model_facts, tokenizer_of
    from .jax_engine import JaxEngine
    from .sharding import AXIS, ShardConfig, kv_repeat

    t = tpu_target(target)
    if tp > t.chips:
        raise TopologyUnavailable(f"tp={tp} needs {tp} chips, target {t.name} has {t.chips}",
                                  field="topology.tp")
    devices = target_devices(target)
    model_config = model_facts(model)

    class AbstractEngine(JaxEngine):
        def __init__(self):  # JaxEngine.__init__ without loading: shapes and shardings only
            self.model, self.dtype, self.tp = model, dtype, tp
            self.shard = ShardConfig(Mesh(np.array(devices[:tp]), (AXIS,)) if tp > 1
                                     else None)
            self.folder = None
            self.model_config = model_config
            r = kv_repeat(model_config, tp)  # fit_kv_heads, on the config alone
            self.cfg = dataclasses.replace(model_config,
                                           num_kv_heads=model_config.num_kv_heads * r)
            self.module = None
            self.params = abstract_params(self.cfg, jnp.dtype(dtype), self.shard, devices[0])
            self.compiled = set()
            self.platform = "tpu"
            self._tokenizer = None

        @property
        def topology(self) -> dict:
            used = devices[:tp]
            return {"tp": tp, "mesh_shape": {AXIS: tp},
                    "devices": [{"id": d.id, "kind": d.device_kind} for d in used]}

        @property
        def tokenizer(self):
            if self._tokenizer is None:
                self._tokenizer = tokenizer_of(model) or False
            return self._tokenizer or None

    return AbstractEngine()

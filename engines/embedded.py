"""Embedded models: deterministic random weights of a preset's shape, in Hugging Face format.

The same preset always gives byte-identical files (one seeded PCG64 stream, tensors drawn
in a fixed order). Weights are scaled so that scores are discriminative: the residual
stream carries real context (attention and MLP outputs of order one), norm weights and
biases are not the trivial ones, so a bug that ignores them changes the scores. The cache
that keeps generated presets, and checks them, is engines/model_cache.py.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import ml_dtypes
import numpy as np

from mibench.errors import ModelError

from .presets import PRESETS, hf_config

GENERATOR_VERSION = 1  # bump when the weights of a preset change: the cache key includes it
SEED = 20260213
SHARD_BYTES = 2 * 1024**3
EMBED_STD = 0.05


def _preset(name: str) -> dict:
    if name not in PRESETS:
        raise ModelError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})",
                         field="model")
    return PRESETS[name]


def _tensor_specs(cfg: dict) -> list[tuple[str, tuple[int, ...], str, float]]:
    """(name, shape, kind, scale) in the fixed generation order. kind: normal | ones | zeros."""
    d, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd, nq, nkv = cfg["head_dim"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    specs = [("model.embed_tokens.weight", (v, d), "normal", EMBED_STD)]
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        specs += [
            (p + "input_layernorm.weight", (d,), "ones", 0.1),
            (p + "self_attn.q_proj.weight", (nq * hd, d), "normal", 1 / math.sqrt(d)),
            (p + "self_attn.k_proj.weight", (nkv * hd, d), "normal", 1 / math.sqrt(d)),
            (p + "self_attn.v_proj.weight", (nkv * hd, d), "normal", 1 / math.sqrt(d)),
            (p + "self_attn.o_proj.weight", (d, nq * hd), "normal", 0.7 / math.sqrt(nq * hd)),
        ]
        if cfg["attention_bias"]:
            specs += [(p + f"self_attn.{n}_proj.bias", (s,), "normal", 0.1)
                      for n, s in (("q", nq * hd), ("k", nkv * hd), ("v", nkv * hd))]
        if cfg["model_type"] == "qwen3":
            specs += [(p + "self_attn.q_norm.weight", (hd,), "ones", 0.3),
                      (p + "self_attn.k_norm.weight", (hd,), "ones", 0.3)]
        specs += [
            (p + "post_attention_layernorm.weight", (d,), "ones", 0.1),
            (p + "mlp.gate_proj.weight", (f, d), "normal", 1 / math.sqrt(d)),
            (p + "mlp.up_proj.weight", (f, d), "normal", 1 / math.sqrt(d)),
            (p + "mlp.down_proj.weight", (d, f), "normal", 0.7 / math.sqrt(f)),
        ]
    specs.append(("model.norm.weight", (d,), "ones", 0.1))
    if not cfg["tie_word_embeddings"]:
        specs.append(("lm_head.weight", (v, d), "normal", EMBED_STD))
    return specs


def _draw(rng: np.random.Generator, shape, kind: str, scale: float) -> np.ndarray:
    # uniform with the given standard deviation: twice as fast as normal draws, same scale
    u = rng.random(shape, dtype=np.float32)
    u = (u - np.float32(0.5)) * np.float32(scale * math.sqrt(12.0))
    return u + np.float32(1.0) if kind == "ones" else u


def _write_weights(cfg: dict, storage_dtype: str, out: Path) -> None:
    from safetensors.numpy import save_file

    dtype = ml_dtypes.bfloat16 if storage_dtype == "bfloat16" else np.float32
    rng = np.random.Generator(np.random.PCG64(SEED))
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name, shape, kind, scale in _tensor_specs(cfg):
        t = _draw(rng, shape, kind, scale).astype(dtype)
        if size and size + t.nbytes > SHARD_BYTES:
            shards.append({})
            size = 0
        shards[-1][name] = t
        size += t.nbytes
    if len(shards) == 1:
        save_file(shards[0], out / "model.safetensors", metadata={"format": "pt"})
        return
    n = len(shards)
    weight_map, total = {}, 0
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        save_file(shard, out / fname, metadata={"format": "pt"})
        weight_map.update({k: fname for k in shard})
        total += sum(t.nbytes for t in shard.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


def make_model(preset: str, out: Path) -> Path:
    """Write preset `preset` as a Hugging Face checkpoint folder at `out`."""
    from .tokenizer import write_tokenizer

    spec = _preset(preset)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = hf_config(spec)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    _write_weights(cfg, spec["storage_dtype"], out)
    write_tokenizer(out, spec["special"], max_length=cfg["max_position_embeddings"])
    return out


def fingerprint(preset: str) -> str:
    """sha256 of everything that decides the files of `preset`: its definition, its
    config.json and the generator's version, seed, shard size and scales."""
    spec = _preset(preset)
    blob = json.dumps({"preset": preset, "spec": spec, "config": hf_config(spec),
                       "generator_version": GENERATOR_VERSION, "seed": SEED,
                       "shard_bytes": SHARD_BYTES, "embed_std": EMBED_STD}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()

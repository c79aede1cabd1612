"""Checkpoint folders: resolve a model spec, read safetensors (one file or an index of
shards), and map Hugging Face tensor names onto the engine's stacked parameters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from mibench.engines.config import ModelConfig, read_config
from mibench.errors import MibenchError, ModelError

EMBEDDED = "embedded:"

# engine key -> (HF name under model.layers.{i}., transpose, shape from config)
LAYER_TABLE = {
    "attn_norm": ("input_layernorm.weight", False, lambda c: (c.hidden_size,)),
    "wq": ("self_attn.q_proj.weight", True, lambda c: (c.hidden_size, c.q_size)),
    "wk": ("self_attn.k_proj.weight", True, lambda c: (c.hidden_size, c.kv_size)),
    "wv": ("self_attn.v_proj.weight", True, lambda c: (c.hidden_size, c.kv_size)),
    "wo": ("self_attn.o_proj.weight", True, lambda c: (c.q_size, c.hidden_size)),
    "bq": ("self_attn.q_proj.bias", False, lambda c: (c.q_size,)),
    "bk": ("self_attn.k_proj.bias", False, lambda c: (c.kv_size,)),
    "bv": ("self_attn.v_proj.bias", False, lambda c: (c.kv_size,)),
    "q_norm": ("self_attn.q_norm.weight", False, lambda c: (c.head_dim,)),
    "k_norm": ("self_attn.k_norm.weight", False, lambda c: (c.head_dim,)),
    "mlp_norm": ("post_attention_layernorm.weight", False, lambda c: (c.hidden_size,)),
    "w_gate": ("mlp.gate_proj.weight", True, lambda c: (c.hidden_size, c.intermediate_size)),
    "w_up": ("mlp.up_proj.weight", True, lambda c: (c.hidden_size, c.intermediate_size)),
    "w_down": ("mlp.down_proj.weight", True, lambda c: (c.intermediate_size, c.hidden_size)),
}


def layer_keys(cfg: ModelConfig) -> list[str]:
    """The per-layer parameters this architecture has."""
    keys = ["attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"]
    if cfg.qkv_bias:
        keys += ["bq", "bk", "bv"]
    if cfg.qk_norm:
        keys += ["q_norm", "k_norm"]
    return keys


def resolve_model(spec: str) -> Path:
    """A checkpoint folder for `spec`: a path, or `embedded:<preset>` (generated and cached)."""
    if not isinstance(spec, str) or not spec:
        raise ModelError("must be a checkpoint folder or embedded:<preset>", field="model")
    if spec.startswith(EMBEDDED):
        from mibench.engines.embedded import ensure_embedded

        return ensure_embedded(spec[len(EMBEDDED):])
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ModelError(f"no such checkpoint folder: {folder}", field="model")
    if not (folder / "config.json").is_file():
        raise ModelError(f"not a checkpoint folder (no config.json): {folder}", field="model")
    if not weight_files(folder):
        raise ModelError(f"not a checkpoint folder (no *.safetensors): {folder}", field="model")
    return folder


def weight_files(folder: Path) -> dict[str, Path]:
    """Tensor name -> file, from model.safetensors.index.json or the lone safetensors file."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        return {name: folder / fname for name, fname in weight_map.items()}
    files = sorted(folder.glob("*.safetensors"))
    if len(files) > 1:
        raise ModelError("several safetensors files but no model.safetensors.index.json",
                         field=str(folder))
    if not files:
        return {}
    from safetensors import safe_open

    with safe_open(files[0], framework="numpy") as f:
        return {name: files[0] for name in f.keys()}


class _Reader:
    """Reads tensors by name, keeping each shard open once."""

    def __init__(self, files: dict[str, Path]):
        self.files, self.handles = files, {}

    def get(self, name: str) -> np.ndarray | None:
        from safetensors import safe_open

        path = self.files.get(name)
        if path is None:
            return None
        if path not in self.handles:
            self.handles[path] = safe_open(path, framework="numpy")
        return self.handles[path].get_tensor(name)


def load_params(folder: Path, cfg: ModelConfig | None = None) -> tuple[ModelConfig, dict]:
    """Read a checkpoint into the engine layout (numpy, storage dtype). Every missing tensor
    and shape mismatch is collected and reported at once.

    Layout: embed [V, D], final_norm [D], lm_head [V, D] (absent when tied), and
    layers[key] stacked over layers: wq [L, D, Nq*H], wo [L, Nq*H, D], w_down [L, F, D], ...
    """
    folder = Path(folder)
    cfg = cfg or read_config(folder)
    reader, errors = _Reader(weight_files(folder)), []

    def take(name: str, shape: tuple[int, ...], transpose: bool = False):
        t = reader.get(name)
        if t is None:
            errors.append(f"missing tensor {name}")
            return None
        t = t.T if transpose else t
        if tuple(t.shape) != shape:
            errors.append(f"{name}: shape {tuple(t.shape)}, expected {shape}")
            return None
        return t

    v, d = cfg.vocab_size, cfg.hidden_size
    params = {"embed": take("model.embed_tokens.weight", (v, d)),
              "final_norm": take("model.norm.weight", (d,))}
    if not cfg.tie_word_embeddings:
        params["lm_head"] = take("lm_head.weight", (v, d))
    layers = {}
    for key in layer_keys(cfg):
        hf_name, transpose, shape = LAYER_TABLE[key]
        per_layer = [take(f"model.layers.{i}.{hf_name}", shape(cfg), transpose)
                     for i in range(cfg.num_layers)]
        if all(t is not None for t in per_layer):
            layers[key] = np.stack(per_layer)
    params["layers"] = layers
    if errors:
        shown = "; ".join(errors[:8]) + (f"; and {len(errors) - 8} more" if len(errors) > 8 else "")
        raise ModelError(f"checkpoint does not match its config.json: {shown}", field=str(folder))
    return cfg, params


def load_tokenizer(folder: Path):
    """The folder's Hugging Face tokenizer, or None when it ships none."""
    folder = Path(folder)
    if not any((folder / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json")):
        return None
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder)
    except Exception as e:  # a broken tokenizer is a model problem, not a crash
        raise ModelError(f"cannot load the tokenizer: {e}", field=str(folder)) from None


def special_ids(tokenizer) -> frozenset[int]:
    """The tokenizer's special token ids (none without a tokenizer)."""
    return frozenset(getattr(tokenizer, "all_special_ids", None) or ())


def encode(tokenizer, text: str) -> list[int]:
    """Token ids of `text` (no special tokens added)."""
    if tokenizer is None:
        raise MibenchError("text given but the model has no tokenizer; pass token ids",
                           field="tokens")
    return tokenizer.encode(text, add_special_tokens=False)

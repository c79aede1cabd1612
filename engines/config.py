"""The engine's model configuration, and the one adapter from a Hugging Face config.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from mibench.errors import ModelError
from mibench.files import Unreadable, read_bounded

# model_type -> (q/k RMSNorm, q/k/v bias)
ARCHITECTURES = {
    "qwen3": (True, False),
    "qwen2": (False, True),
    "llama": (False, False),
}


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape and numerics of a decoder-only model, as the engines need them."""

    architecture: str  # "qwen3" | "qwen2" | "llama"
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    tie_word_embeddings: bool
    max_position_embeddings: int
    qk_norm: bool
    qkv_bias: bool
    rope_scaling: tuple[tuple[str, float], ...] | None = None  # llama3-style, sorted items

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    def num_params(self) -> int:
        """Parameter count (embeddings and LM head counted once each)."""
        d, l = self.hidden_size, self.num_layers
        attn = d * (self.q_size + 2 * self.kv_size) + self.q_size * d
        mlp = 3 * d * self.intermediate_size
        head = 0 if self.tie_word_embeddings else self.vocab_size * d
        return self.vocab_size * d + head + l * (attn + mlp)


def _rope(hf: dict) -> tuple[float, tuple | None]:
    """RoPE theta and llama3 scaling from either the v4 (`rope_theta`, `rope_scaling`)
    or the v5 (`rope_parameters`) spelling of config.json."""
    params = dict(hf.get("rope_parameters") or {})
    scaling = hf.get("rope_scaling") or params
    theta = float(params.get("rope_theta", hf.get("rope_theta", 10000.0)))
    rope_type = (scaling or {}).get("rope_type", (scaling or {}).get("type", "default"))
    if rope_type in (None, "default"):
        return theta, None
    if rope_type != "llama3":
        raise ModelError(f"unsupported RoPE scaling {rope_type!r} (supported: default, llama3)",
                         field="config.json rope_scaling")
    keys = ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
    missing = [k for k in keys if k not in scaling]
    if missing:
        raise ModelError(f"llama3 RoPE scaling lacks {missing}", field="config.json rope_scaling")
    return theta, tuple((k, float(scaling[k])) for k in keys)


def from_hf_config(hf: dict, source: str = "config.json") -> ModelConfig:
    """Adapt a Hugging Face config dict; unsupported architectures are a ModelError."""
    model_type = hf.get("model_type")
    if model_type not in ARCHITECTURES:
        raise ModelError(
            f"unsupported architecture {model_type!r} (supported: {', '.join(ARCHITECTURES)})",
            field=f"{source} model_type")
    qk_norm, qkv_bias = ARCHITECTURES[model_type]
    try:
        heads = int(hf["num_attention_heads"])
        hidden = int(hf["hidden_size"])
        theta, scaling = _rope(hf)
        return ModelConfig(
            architecture=model_type,
            vocab_size=int(hf["vocab_size"]),
            hidden_size=hidden,
            num_layers=int(hf["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(hf.get("num_key_value_heads") or heads),
            head_dim=int(hf.get("head_dim") or hidden // heads),
            intermediate_size=int(hf["intermediate_size"]),
            rope_theta=theta,
            rms_norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
            tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
            max_position_embeddings=int(hf.get("max_position_embeddings", 32768)),
            qk_norm=qk_norm,
            qkv_bias=bool(hf.get("attention_bias", qkv_bias)) or qkv_bias,
            rope_scaling=scaling,
        )
    except KeyError as e:
        raise ModelError(f"missing key {e.args[0]!r}", field=source) from None


# a checkpoint's config.json or safetensors index: kilobytes (an index of thousands of
# tensors, a few MB)
MAX_JSON_BYTES = 64 * 1024**2


def read_json(path: Path, what: str):
    """A checkpoint's JSON file (`what`: config.json, its index) through the bounded reader
    (at most MAX_JSON_BYTES; a FIFO, a device or a link loop refused unread); a ModelError
    naming the file otherwise."""
    try:
        return json.loads(read_bounded(path, MAX_JSON_BYTES, what))
    except Unreadable as e:
        raise ModelError(e.why, field=str(path)) from None
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise ModelError(f"invalid JSON: {str(e).splitlines()[0]}", field=str(path)) from None


def read_config(folder: Path) -> ModelConfig:
    path = Path(folder) / "config.json"
    if not (path.exists() or path.is_symlink()):  # one that is there but unreadable: named
        raise ModelError("not a checkpoint folder (no config.json)", field=str(folder))
    return from_hf_config(read_json(path, "config.json"), source=str(path))

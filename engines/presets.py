"""Embedded model presets: shapes of real and tiny decoder-only models, as data.

Each preset is the Hugging Face `config.json` of its checkpoint (architecture key first),
plus `storage_dtype`, the dtype its safetensors are written in.
"""

from __future__ import annotations

QWEN_VOCAB = 151936
QWEN_SPECIAL = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
LLAMA_VOCAB = 128256
LLAMA_SPECIAL = {"<|begin_of_text|>": 128000, "<|end_of_text|>": 128001}

_QWEN3 = dict(arch="qwen3", vocab_size=QWEN_VOCAB, rope_theta=1e6, rms_norm_eps=1e-6,
              tie_word_embeddings=True, max_position_embeddings=40960, special=QWEN_SPECIAL)
_QWEN2 = dict(arch="qwen2", vocab_size=QWEN_VOCAB, rope_theta=1e6, rms_norm_eps=1e-6,
              tie_word_embeddings=True, max_position_embeddings=32768, special=QWEN_SPECIAL)
_LLAMA = dict(arch="llama", vocab_size=LLAMA_VOCAB, rope_theta=5e5, rms_norm_eps=1e-5,
              tie_word_embeddings=True, max_position_embeddings=131072, special=LLAMA_SPECIAL)
_LLAMA3_SCALING = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def _shape(hidden, layers, heads, kv_heads, head_dim, mlp):
    return dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                num_key_value_heads=kv_heads, head_dim=head_dim, intermediate_size=mlp)


PRESETS: dict[str, dict] = {
    # tiny shapes for tests: float32 storage so float32 parity sees the exact weights
    "tiny": {**_QWEN3, **_shape(256, 4, 4, 2, 64, 768), "storage_dtype": "float32"},
    "tiny-kv8": {**_QWEN3, **_shape(256, 4, 8, 8, 32, 768), "storage_dtype": "float32"},
    # head dim 128 (sglang-jax's native attention fails on 64 at the first request)
    "tiny-h128": {**_QWEN3, **_shape(256, 2, 2, 1, 128, 768), "storage_dtype": "float32"},
    "tiny-qwen2": {**_QWEN2, **_shape(256, 4, 4, 2, 64, 768), "storage_dtype": "float32"},
    "tiny-llama": {**_LLAMA, **_shape(256, 4, 4, 2, 64, 768), "rope_scaling": _LLAMA3_SCALING,
                   "storage_dtype": "float32"},
    "small": {**_QWEN3, **_shape(512, 8, 8, 4, 64, 1536), "storage_dtype": "float32"},
    # real shapes: random weights cost exactly what trained ones do
    "qwen3-0.6b": {**_QWEN3, **_shape(1024, 28, 16, 8, 128, 3072), "storage_dtype": "bfloat16"},
    "qwen3-1.7b": {**_QWEN3, **_shape(2048, 28, 16, 8, 128, 6144), "storage_dtype": "bfloat16"},
    "qwen3-4b": {**_QWEN3, **_shape(2560, 36, 32, 8, 128, 9728), "storage_dtype": "bfloat16"},
    "qwen2.5-1.5b": {**_QWEN2, **_shape(1536, 28, 12, 2, 128, 8960),
                     "storage_dtype": "bfloat16"},
    "llama-3.2-1b": {**_LLAMA, **_shape(2048, 16, 32, 8, 64, 8192),
                     "rope_scaling": _LLAMA3_SCALING, "storage_dtype": "bfloat16"},
}

_HF_CLASSES = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM",
               "llama": "LlamaForCausalLM"}


def hf_config(preset: dict) -> dict:
    """The config.json of a preset, readable by transformers v4 and v5 alike."""
    arch = preset["arch"]
    special = preset["special"]
    eos = min(special.values())
    cfg = {
        "architectures": [_HF_CLASSES[arch]],
        "model_type": arch,
        **{k: preset[k] for k in ("vocab_size", "hidden_size", "intermediate_size",
                                   "num_hidden_layers", "num_attention_heads",
                                   "num_key_value_heads", "head_dim", "rms_norm_eps",
                                   "tie_word_embeddings", "max_position_embeddings")},
        "hidden_act": "silu",
        "attention_bias": arch == "qwen2",
        "attention_dropout": 0.0,
        "rope_theta": preset["rope_theta"],
        "rope_parameters": {"rope_type": "default", "rope_theta": preset["rope_theta"]},
        "bos_token_id": eos,
        "eos_token_id": eos,
        "torch_dtype": preset["storage_dtype"],
        "use_cache": True,
    }
    if "rope_scaling" in preset:
        cfg["rope_scaling"] = dict(preset["rope_scaling"])
        cfg["rope_parameters"] = {**preset["rope_scaling"], "rope_theta": preset["rope_theta"]}
    if arch == "qwen3":
        cfg.update(use_sliding_window=False, sliding_window=None, max_window_layers=28)
    return cfg

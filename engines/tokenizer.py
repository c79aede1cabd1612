"""A byte-level tokenizer for embedded models: one token per byte (ids 0..255) plus the
preset's special tokens at their real ids, saved as a `tokenizer.json` that
`transformers.AutoTokenizer` loads unchanged."""

from __future__ import annotations

import json
from pathlib import Path


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table: printable stand-ins for the 256 byte values."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
            *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def tokenizer_json(special: dict[str, int]) -> dict:
    # special tokens live in the model's vocab too, so they keep their real ids
    vocab = {c: i for i, c in enumerate(_byte_chars())} | special
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t, i in sorted(special.items(),
                                                                       key=lambda kv: kv[1])]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }


def write_tokenizer(out: Path, special: dict[str, int], max_length: int) -> None:
    out = Path(out)
    (out / "tokenizer.json").write_text(
        json.dumps(tokenizer_json(special), indent=1, ensure_ascii=False) + "\n")
    eos = min(special, key=special.get)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": eos, "pad_token": eos,
              "model_max_length": max_length, "clean_up_tokenization_spaces": False}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

"""A model's facts (vocabulary, shape, maximum length) without generating or loading any
weights: an embedded preset's definition, or a checkpoint folder's `config.json` only.
What `mibench validate` checks a config against, in milliseconds. Also the tokenizer
alone (`tokenizer_of`), for engines that hold no weights (http, the TPU compile engine)."""

from __future__ import annotations

from pathlib import Path

from mibench.errors import MibenchError, ModelError

from .config import ModelConfig, from_hf_config, read_json
from .presets import PRESETS, hf_config

EMBEDDED = "embedded:"
INDEX = "model.safetensors.index.json"


def model_facts(spec: str) -> ModelConfig:
    """The ModelConfig of `spec` (`embedded:<preset>` or a checkpoint folder), or a
    ModelError naming the model (an unknown preset, a missing folder, a folder that is not
    a checkpoint, a config.json that is not JSON or lacks a key)."""
    if not isinstance(spec, str) or not spec:
        raise ModelError(f"must be a checkpoint folder or embedded:<preset>, got {spec!r}",
                         field="model")
    if spec.startswith(EMBEDDED):
        name = spec[len(EMBEDDED):]
        if name not in PRESETS:
            raise ModelError(f"unknown preset {name!r} (known: {', '.join(PRESETS)})",
                             field="model")
        return from_hf_config(hf_config(PRESETS[name]), source=spec)
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ModelError(f"no such checkpoint folder: {folder}", field="model")
    path = folder / "config.json"
    if not (path.exists() or path.is_symlink()):  # one that is there but unreadable: named
        raise ModelError(f"not a checkpoint folder (no config.json): {folder}", field="model")
    if not ((folder / INDEX).is_file() or any(folder.glob("*.safetensors"))):
        raise ModelError(f"not a checkpoint folder (no *.safetensors): {folder}", field="model")
    hf = read_json(path, "config.json")
    if not isinstance(hf, dict):
        raise ModelError(f"must be a JSON object, got {type(hf).__name__}", field=str(path))
    try:
        cfg = from_hf_config(hf, source=str(path))
    except MibenchError:
        raise
    except (ValueError, TypeError, AttributeError, OverflowError) as e:
        raise ModelError(f"malformed: {str(e).splitlines()[0]}", field=str(path)) from None
    for key, value in (("vocab_size", cfg.vocab_size),
                       ("max_position_embeddings", cfg.max_position_embeddings)):
        if value < 1:
            raise ModelError(f"{key} is {value}, not a positive integer", field=str(path))
    return cfg


def tokenizer_of(model: str):
    """The model's tokenizer without its weights: an embedded preset's byte-level
    tokenizer (written to a scratch folder), a checkpoint folder's own, or None where
    `model` is neither (a name only a server knows)."""
    import tempfile

    from .checkpoint import load_tokenizer

    if model.startswith(EMBEDDED):
        from .tokenizer import write_tokenizer

        preset = PRESETS[model[len(EMBEDDED):]]
        with tempfile.TemporaryDirectory(prefix="mibench-tokenizer-") as tmp:
            write_tokenizer(Path(tmp), preset["special"],
                            max_length=hf_config(preset)["max_position_embeddings"])
            return load_tokenizer(Path(tmp))
    folder = Path(model).expanduser()
    return load_tokenizer(folder) if folder.is_dir() else None

"""Checkpoint folders: resolve a model spec, check a folder against its config.json, read
safetensors (one file or an index of shards), and map Hugging Face tensor names onto the
engine's stacked parameters.

Every load checks the checkpoint first (`check_checkpoint`, both engines): config.json
parses, every safetensors header agrees with its file's size (a truncated or damaged file
is a one-line ModelError naming it), and the tensors are exactly those the config implies,
with its shapes: missing, unused and misshapen tensors are one error listing all of them.
"""

from __future__ import annotations

import json
import math
import re
import stat
from pathlib import Path
from typing import NamedTuple

import numpy as np

from mibench.errors import MibenchError, ModelError
from mibench.files import nearby_if_absent

from .config import ModelConfig, read_config, read_json

EMBEDDED = "embedded:"
INDEX = "model.safetensors.index.json"
# safetensors dtype -> bytes per element
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")
MAX_HEADER_BYTES = 100 * 1024**2
# tensors some checkpoints carry that no engine reads and that cannot change the scores
# (RoPE frequencies are recomputed from config.json; transformers ignores them too)
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)

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


class TensorInfo(NamedTuple):
    """Where a tensor is and what its safetensors header says about it."""

    file: Path
    dtype: str
    shape: tuple[int, ...]


def resolve_model(spec: str) -> Path:
    """A checkpoint folder for `spec`: a path, or `embedded:<preset>` (generated and cached,
    checked against its manifest and regenerated when damaged). A folder with a mibench
    manifest (a copy of an embedded model) must still match it."""
    if not isinstance(spec, str) or not spec:
        raise ModelError("must be a checkpoint folder or embedded:<preset>", field="model")
    if spec.startswith(EMBEDDED):
        from .model_cache import ensure_embedded

        return ensure_embedded(spec[len(EMBEDDED):])
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise ModelError(f"no such checkpoint folder: {folder}{nearby_if_absent(folder)}",
                             field="model")
    if not (folder / "config.json").is_file():
        raise ModelError(f"not a checkpoint folder (no config.json): {folder}", field="model")
    if not ((folder / INDEX).is_file() or any(folder.glob("*.safetensors"))):
        raise ModelError(f"not a checkpoint folder (no *.safetensors): {folder}", field="model")
    _check_manifest(folder, full=False)
    return folder


def _check_manifest(folder: Path, full: bool, preset: str | None = None,
                    hint: str | None = None) -> int:
    """A folder holding a mibench manifest (required with `preset`) must match it, else a
    ModelError naming the first file that does not; the number of files it covers (0: the
    folder has no manifest)."""
    from .model_cache import (
        MANIFEST,
        describe_problems,
        manifest_problems,
        read_manifest,
    )

    if preset is None and not (folder / MANIFEST).exists():
        return 0
    problems = manifest_problems(folder, preset, full=full, restamp=not full)
    if problems:
        hint = hint or (f"restore the folder, or delete {MANIFEST} to use its files as they "
                        "are")
        raise ModelError(f"{describe_problems(problems)}; {hint}",
                         field=str(folder / problems[0][0]))
    return len(read_manifest(folder)["files"])


def checkpoint_config(folder: Path) -> ModelConfig:
    """The folder's config.json as a ModelConfig; any malformed file is a ModelError."""
    try:
        return read_config(folder)
    except MibenchError:
        raise
    except (OSError, ValueError, TypeError, AttributeError) as e:
        raise ModelError(f"malformed: {e}", field=str(Path(folder) / "config.json")) from None


def read_header(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    """Tensor name -> (dtype, shape) from a safetensors header, checked against the file:
    every tensor's byte span matches its dtype and shape, the spans tile the data, and the
    file is exactly as long as the header says (a truncated file is caught here)."""
    path = Path(path)

    def corrupt(what: str) -> ModelError:
        return ModelError(f"corrupt safetensors file: {what}", field=str(path))

    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block open(), a device never end
            raise ModelError("is not a regular file (a FIFO, a device or a socket), so it "
                             "is not read as a safetensors file", field=str(path))
        size = st.st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise corrupt(f"{size} bytes, too short for a header")
            n = int.from_bytes(head, "little")
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise corrupt(f"header length {n} does not fit the file ({size} bytes)")
            raw = f.read(n)
    except OSError as e:
        raise ModelError(f"cannot read: {e.strerror or e}", field=str(path)) from None
    try:
        header = json.loads(raw)
    except ValueError:
        raise corrupt("the header is not JSON") from None
    if not isinstance(header, dict):
        raise corrupt("the header is not a JSON object")
    header.pop("__metadata__", None)
    tensors, spans = {}, []
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            ok = (dtype in DTYPE_BYTES and isinstance(shape, list)
                  and all(type(x) is int and x >= 0 for x in [*shape, begin, end])
                  and begin <= end)
        except (TypeError, KeyError, ValueError):
            ok = False
        if not ok:
            raise corrupt(f"bad header entry for {name}: {json.dumps(info)[:200]}")
        if end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
            raise corrupt(f"{name}: {end - begin} bytes for {dtype} {tuple(shape)}")
        tensors[name] = (dtype, tuple(shape))
        spans.append((begin, end, name))
    pos = 0
    for begin, end, name in sorted(spans):
        if begin != pos:
            raise corrupt(f"{name}: data at byte {begin}, expected {pos} (overlap or gap)")
        pos = end
    data = size - 8 - n
    if data < pos:
        raise ModelError(f"truncated safetensors file: {size} bytes, its header needs "
                         f"{8 + n + pos}", field=str(path))
    if data > pos:
        raise corrupt(f"{data - pos} bytes after the last tensor")
    return tensors


def scan_weights(folder: Path) -> dict[str, TensorInfo]:
    """Every tensor of the checkpoint (from model.safetensors.index.json and its shards, or
    the lone safetensors file), with every header read and checked."""
    folder = Path(folder)
    index = folder / INDEX
    if index.is_file():
        try:
            weight_map = read_json(index, "safetensors index")["weight_map"]
            if not (isinstance(weight_map, dict)
                    and all(isinstance(v, str) for v in weight_map.values())):
                raise TypeError("weight_map must map names to files")
        except ModelError:
            raise  # read_json names the file and why
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ModelError(f"malformed index: {e}", field=str(index)) from None
        shards = sorted(set(weight_map.values()))
        missing = [f for f in shards if not (folder / f).is_file()]
        if missing:
            raise ModelError(f"shard files listed in {INDEX} are missing: {', '.join(missing)}",
                             field=str(folder / missing[0]))
    else:
        shards = [p.name for p in sorted(folder.glob("*.safetensors"))]
        if len(shards) > 1:
            raise ModelError(f"several safetensors files but no {INDEX}", field=str(folder))
        if not shards:
            raise ModelError("not a checkpoint folder (no *.safetensors)", field=str(folder))
        weight_map = None
    infos, errors = {}, []
    for fname in shards:
        for name, (dtype, shape) in read_header(folder / fname).items():
            if name in infos:
                errors.append(f"{name} is in both {infos[name].file.name} and {fname}")
            infos[name] = TensorInfo(folder / fname, dtype, shape)
    if weight_map is not None:
        for name, fname in sorted(weight_map.items()):
            if name not in infos:
                errors.append(f"{name} is not in {fname}")
            elif infos[name].file.name != fname:
                errors.append(f"{name} is in {infos[name].file.name}, not {fname}")
        errors += [f"{name} ({infos[name].file.name}) is not in the index"
                   for name in sorted(infos.keys() - weight_map.keys())]
    if errors:
        raise ModelError(f"{INDEX} does not match the shards: {'; '.join(errors)}",
                         field=str(index))
    return infos


def expected_tensors(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the config implies, with its shape as stored (Hugging Face layout)."""
    v, d = cfg.vocab_size, cfg.hidden_size
    out = {"model.embed_tokens.weight": (v, d), "model.norm.weight": (d,)}
    if not cfg.tie_word_embeddings:
        out["lm_head.weight"] = (v, d)
    for key in layer_keys(cfg):
        hf_name, transpose, shape = LAYER_TABLE[key]
        stored = tuple(shape(cfg))[::-1] if transpose else tuple(shape(cfg))
        for i in range(cfg.num_layers):
            out[f"model.layers.{i}.{hf_name}"] = stored
    return out


def _natural(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def check_checkpoint(folder: Path, cfg: ModelConfig | None = None
                     ) -> tuple[ModelConfig, dict[str, TensorInfo]]:
    """The config and tensors of a checkpoint that matches its config.json exactly; else one
    ModelError listing every missing, unused and misshapen tensor (and wrong dtype)."""
    folder = Path(folder)
    cfg = cfg or checkpoint_config(folder)
    infos = scan_weights(folder)
    expected = expected_tensors(cfg)
    missing, unused, bad = [], [], []
    for name in sorted(expected, key=_natural):
        info = infos.get(name)
        if info is None:
            missing.append(f"missing tensor {name}")
        elif info.shape != expected[name]:
            bad.append(f"{name}: shape {info.shape}, expected {expected[name]}")
        elif info.dtype not in FLOAT_DTYPES:
            bad.append(f"{name}: dtype {info.dtype}, expected one of {', '.join(FLOAT_DTYPES)}")
    unused = [f"unused tensor {name}" for name in sorted(infos.keys() - expected.keys(),
                                                          key=_natural)
              if not name.endswith(IGNORED_SUFFIXES)]
    if missing or unused or bad:
        counts = ", ".join(f"{len(x)} {what}" for x, what in
                           ((missing, "missing"), (unused, "unused"), (bad, "misshapen"))
                           if x)
        files = ", ".join(sorted({i.file.name for i in infos.values()}))
        raise ModelError(f"the tensors in {files} do not match config.json ({counts}): "
                         + "; ".join(missing + unused + bad), field=str(folder))
    return cfg, infos


class _Reader:
    """Reads tensors by name, keeping each shard open once."""

    def __init__(self, files: dict[str, Path]):
        self.files, self.handles = files, {}

    def get(self, name: str) -> np.ndarray:
        from safetensors import safe_open

        path = self.files[name]
        try:
            if path not in self.handles:
                self.handles[path] = safe_open(path, framework="numpy")
            return self.handles[path].get_tensor(name)
        except Exception as e:  # SafetensorError and I/O errors: a damaged file, one line
            raise ModelError(f"cannot read tensor {name}: {e}", field=str(path)) from None


def load_params(folder: Path, cfg: ModelConfig | None = None) -> tuple[ModelConfig, dict]:
    """Read a checkpoint into the engine layout (numpy, storage dtype), after
    `check_checkpoint` (every problem reported at once, before reading any data).

    Layout: embed [V, D], final_norm [D], lm_head [V, D] (absent when tied), and
    layers[key] stacked over layers: wq [L, D, Nq*H], wo [L, Nq*H, D], w_down [L, F, D], ...
    """
    folder = Path(folder)
    cfg, infos = check_checkpoint(folder, cfg)
    reader = _Reader({name: info.file for name, info in infos.items()})

    def take(name: str, transpose: bool = False) -> np.ndarray:
        t = reader.get(name)
        return t.T if transpose else t

    params = {"embed": take("model.embed_tokens.weight"), "final_norm": take("model.norm.weight")}
    if not cfg.tie_word_embeddings:
        params["lm_head"] = take("lm_head.weight")
    layers = {}
    for key in layer_keys(cfg):
        hf_name, transpose, _ = LAYER_TABLE[key]
        layers[key] = np.stack([take(f"model.layers.{i}.{hf_name}", transpose)
                                for i in range(cfg.num_layers)])
    params["layers"] = layers
    return cfg, params


def verify_model(spec: str) -> str:
    """Fully check a checkpoint folder or `embedded:<preset>` without changing it: every file
    hashed against the manifest (embedded models, and folders that carry one), then
    config.json, the safetensors headers and the tensors against the config. A one-line
    summary; a ModelError naming the file otherwise, with how to repair it."""
    from .model_cache import MANIFEST, embedded_folder

    if not isinstance(spec, str) or not spec:
        raise ModelError("must be a checkpoint folder or embedded:<preset>", field="model")
    preset = spec[len(EMBEDDED):] if spec.startswith(EMBEDDED) else None
    if preset is not None:
        folder = embedded_folder(preset)
        if not folder.is_dir():
            raise ModelError(f"{spec} is not in the cache yet (it is generated on first load)",
                             field=str(folder))
        hint = f"it is regenerated on the next load of {spec} (or delete {folder})"
    else:
        folder = Path(spec).expanduser()
        if not folder.is_dir():
            raise ModelError(f"no such checkpoint folder: {folder}{nearby_if_absent(folder)}",
                             field="model")
        hint = None
    hashed = _check_manifest(folder, full=True, preset=preset, hint=hint)
    try:
        cfg, infos = check_checkpoint(folder)
    except ModelError as e:
        if hint is None:
            raise
        raise ModelError(f"{e.message}; {hint}", field=e.field) from None
    files = sorted({info.file for info in infos.values()})
    size = sum(f.stat().st_size for f in files)
    line = (f"ok: {folder}: {cfg.architecture}, {cfg.num_layers} layers, {len(infos)} tensors "
            f"in {len(files)} file{'s' * (len(files) > 1)} ({size / 1e6:.1f} MB) match "
            "config.json")
    if hashed:
        line += f"; {hashed} files match {MANIFEST} (sha256)"
    return line


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

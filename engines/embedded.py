"""Embedded models: deterministic random weights of a preset's shape, in Hugging Face format.

The same preset always gives byte-identical files (one seeded PCG64 stream, tensors drawn
in a fixed order). Weights are scaled so that scores are discriminative: the residual
stream carries real context (attention and MLP outputs of order one), norm weights and
biases are not the trivial ones, so a bug that ignores them changes the scores.

The cache (`ensure_embedded`) is self-checking: each folder holds `mibench-manifest.json`,
the preset's fingerprint (its definition and the generator version) and every file's size,
mtime_ns, ctime_ns and sha256. Every load compares the stat fields (cheap); a file whose
stat differs is hashed; anything that does not match (a file edited, truncated, deleted or
added, another fingerprint, no manifest) regenerates the folder, atomically. ctime cannot
be set back, so an in-place edit that restores size and mtime is still caught at load time;
`mibench model verify embedded:<preset>` hashes every file regardless.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import stat
import sys
import tempfile
import uuid
from pathlib import Path

import ml_dtypes
import numpy as np

from mibench.engines.presets import PRESETS, hf_config
from mibench.errors import ModelError

GENERATOR_VERSION = 1  # bump when the weights of a preset change: the cache key includes it
SEED = 20260213
SHARD_BYTES = 2 * 1024**3
EMBED_STD = 0.05


def cache_dir() -> Path:
    """`MIBENCH_CACHE`, else `$XDG_CACHE_HOME/mibench`, else `~/.cache/mibench`."""
    if os.environ.get("MIBENCH_CACHE"):
        return Path(os.environ["MIBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mibench"


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
    from mibench.engines.tokenizer import write_tokenizer

    spec = _preset(preset)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = hf_config(spec)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    _write_weights(cfg, spec["storage_dtype"], out)
    write_tokenizer(out, spec["special"], max_length=cfg["max_position_embeddings"])
    return out


MANIFEST = "mibench-manifest.json"
MANIFEST_FORMAT = 1
_SCRATCH = ".mibench-"  # prefix of the manifest's temporary file while it is rewritten


def embedded_folder(preset: str) -> Path:
    """Where the cache keeps preset `preset` (whether or not it is there yet)."""
    _preset(preset)
    return cache_dir() / "embedded" / f"{preset}-g{GENERATOR_VERSION}"


def fingerprint(preset: str) -> str:
    """sha256 of everything that decides the files of `preset`: its definition, its
    config.json and the generator's version, seed, shard size and scales."""
    spec = _preset(preset)
    blob = json.dumps({"preset": preset, "spec": spec, "config": hf_config(spec),
                       "generator_version": GENERATOR_VERSION, "seed": SEED,
                       "shard_bytes": SHARD_BYTES, "embed_std": EMBED_STD}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _entries(folder: Path) -> list[str]:
    """The folder's entries the manifest covers (all but itself and its scratch file)."""
    return sorted(p.name for p in folder.iterdir()
                  if p.name != MANIFEST and not p.name.startswith(_SCRATCH))


def _write_json_atomic(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=_SCRATCH, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(data, indent=1, sort_keys=True) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_manifest(folder: Path, preset: str) -> dict:
    """Record the fingerprint of `preset` and every file of `folder` in its manifest."""
    folder = Path(folder)
    files = {}
    for name in _entries(folder):
        st = (folder / name).stat()
        files[name] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns,
                       "ctime_ns": st.st_ctime_ns, "sha256": _sha256(folder / name)}
    manifest = {"format": MANIFEST_FORMAT, "preset": preset,
                "generator_version": GENERATOR_VERSION, "fingerprint": fingerprint(preset),
                "files": files}
    _write_json_atomic(folder / MANIFEST, manifest)
    return manifest


def read_manifest(folder: Path) -> dict | None:
    """The folder's manifest, or None when it is missing, unreadable or malformed."""
    try:
        manifest = json.loads((Path(folder) / MANIFEST).read_text())
        files = manifest["files"]
        ok = (manifest.get("format") == MANIFEST_FORMAT and isinstance(files, dict) and files
              and all(isinstance(name, str) and name and "/" not in name and "\\" not in name
                      and name not in (".", "..", MANIFEST)
                      and isinstance(rec, dict)
                      and all(isinstance(rec.get(k), int) and not isinstance(rec.get(k), bool)
                              for k in ("size", "mtime_ns", "ctime_ns"))
                      and isinstance(rec.get("sha256"), str)
                      for name, rec in files.items()))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return manifest if ok else None


def manifest_problems(folder: Path, preset: str | None = None, full: bool = False,
                      restamp: bool = True) -> list[tuple[str, str]]:
    """What in `folder` does not match its manifest, as (file name, problem); [] if all does.

    Cheap by default: sizes and stat times are compared and only a file whose mtime or ctime
    differs is hashed (`full`: every file is). With `preset`, the manifest must also carry
    that preset's current fingerprint. When every file matches but some were hashed for a
    stat difference (the folder was copied or touched), the manifest takes their new stat
    times (`restamp`, best effort) so the next load is cheap again.
    """
    folder = Path(folder)
    if not (folder / MANIFEST).exists():
        return [(MANIFEST, "missing")]
    manifest = read_manifest(folder)
    if manifest is None:
        return [(MANIFEST, "unreadable or malformed")]
    problems = []
    if preset is not None and (manifest.get("preset") != preset
                               or manifest.get("fingerprint") != fingerprint(preset)):
        problems.append((MANIFEST, f"made for another definition of preset {preset!r} "
                                   "(fingerprint differs)"))
    files = manifest["files"]
    try:
        present = _entries(folder)
    except OSError as e:
        return [*problems, (".", f"unreadable folder ({e.strerror})")]
    problems += [(name, "not in the manifest") for name in present if name not in files]
    restamped = False
    for name, rec in sorted(files.items()):
        try:
            st = os.stat(folder / name)
        except FileNotFoundError:
            problems.append((name, "missing"))
            continue
        except OSError as e:
            problems.append((name, f"unreadable ({e.strerror})"))
            continue
        if not stat.S_ISREG(st.st_mode):
            problems.append((name, "not a regular file"))
        elif st.st_size != rec["size"]:
            problems.append((name, f"size {st.st_size} bytes, the manifest says {rec['size']}"))
        elif full or (st.st_mtime_ns, st.st_ctime_ns) != (rec["mtime_ns"], rec["ctime_ns"]):
            try:
                digest = _sha256(folder / name)
            except OSError as e:
                problems.append((name, f"unreadable ({e.strerror})"))
                continue
            if digest != rec["sha256"]:
                problems.append((name, "content differs from the manifest (sha256)"))
            elif (st.st_mtime_ns, st.st_ctime_ns) != (rec["mtime_ns"], rec["ctime_ns"]):
                rec.update(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
                restamped = True
    if restamped and restamp and not problems:
        with contextlib.suppress(OSError):  # a read-only folder just stays on the slow path
            _write_json_atomic(folder / MANIFEST, manifest)
    return problems


def describe_problems(problems: list[tuple[str, str]], named: bool = False) -> str:
    """One line: the first problem (after its file's name if `named`), then the others."""
    first, *rest = problems
    line = f"{first[0]}: {first[1]}" if named else first[1]
    if rest:
        line += " (also " + "; ".join(f"{name}: {what}" for name, what in rest) + ")"
    return line


@contextlib.contextmanager
def _generation_lock(final: Path):
    """Serialize generation of one preset between processes (best effort: flock)."""
    fd = None
    try:
        import fcntl

        fd = os.open(final.parent / f".{final.name}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except (ImportError, OSError):
        if fd is not None:
            os.close(fd)
            fd = None
    try:
        yield fd is not None
    finally:
        if fd is not None:
            os.close(fd)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _clean_leftovers(final: Path) -> None:
    """Folders that crashed or raced processes left next to `final` (only under the lock:
    no live process of this preset is generating then)."""
    for pattern in (f".{final.name}.tmp-*", f".{final.name}.old-*"):
        for path in final.parent.glob(pattern):
            _remove(path)


def _install(tmp: Path, final: Path, preset: str) -> None:
    """Move the generated folder `tmp` to `final`, replacing what is there; safe when
    several processes race: a folder another process installed meanwhile is kept if it
    verifies, and the replaced one is renamed aside first (a rename onto a non-empty folder
    fails) and then deleted."""
    for _ in range(8):
        try:
            os.rename(tmp, final)
            return
        except OSError as e:
            if not os.path.lexists(final):
                raise ModelError(f"cannot install the generated model: {e.strerror or e}",
                                 field=str(final)) from None
        if final.is_dir() and not manifest_problems(final, preset, restamp=False):
            return  # another process installed a good folder first
        aside = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:12]}"
        try:
            os.rename(final, aside)
        except FileNotFoundError:
            continue  # another process moved it aside: look again
        except OSError as e:
            raise ModelError(f"cannot replace the damaged folder: {e.strerror or e}",
                             field=str(final)) from None
        try:
            os.rename(tmp, final)
            return
        except OSError:
            continue  # another process installed its folder in between: check it
        finally:
            _remove(aside)
    raise ModelError("cannot replace the damaged folder: other processes keep changing it",
                     field=str(final))


def ensure_embedded(preset: str) -> Path:
    """The cached folder of `preset`, checked against its manifest; generated on first use
    and regenerated when damaged (atomically; safe under concurrent callers)."""
    final = embedded_folder(preset)
    if os.path.lexists(final):
        problems = manifest_problems(final, preset)
        if not problems:
            return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with _generation_lock(final) as locked:
        if os.path.lexists(final):
            problems = manifest_problems(final, preset)
            if not problems:
                return final  # another process repaired it while we waited for the lock
            print(f"mibench: the cached embedded:{preset} at {final} is damaged "
                  f"({describe_problems(problems, named=True)}); regenerating it", file=sys.stderr)
        if locked:
            _clean_leftovers(final)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=final.parent))
        try:
            make_model(preset, tmp)
            write_manifest(tmp, preset)
            _install(tmp, final, preset)
        except OSError as e:
            raise ModelError(f"cannot generate embedded:{preset}: {e}",
                             field=str(final)) from None
        finally:
            _remove(tmp)
    return final

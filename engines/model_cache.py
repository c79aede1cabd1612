"""The model cache: generated embedded presets, self-checking (`ensure_embedded`).

Each folder holds `mibench-manifest.json`: the preset's fingerprint (its definition and the
generator version, engines/embedded.py) and every file's size, mtime_ns, ctime_ns and
sha256. Every load compares the stat fields (cheap); a file whose stat differs is hashed;
anything that does not match (a file edited, truncated, deleted or added, another
fingerprint, no manifest) regenerates the folder, atomically. ctime cannot be set back, so
an in-place edit that restores size and mtime is still caught at load time; `mibench model
verify embedded:<preset>` hashes every file regardless.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import stat
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

from mibench.errors import ModelError
from mibench.files import Unreadable, read_bounded

from .config import MAX_JSON_BYTES
from .embedded import GENERATOR_VERSION, _preset, fingerprint, make_model


def cache_dir() -> Path:
    """`MIBENCH_CACHE`, else `$XDG_CACHE_HOME/mibench`, else `~/.cache/mibench`."""
    if os.environ.get("MIBENCH_CACHE"):
        return Path(os.environ["MIBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mibench"


MANIFEST = "mibench-manifest.json"
MANIFEST_FORMAT = 1
_SCRATCH = ".mibench-"  # prefix of the manifest's temporary file while it is rewritten


def embedded_folder(preset: str) -> Path:
    """Where the cache keeps preset `preset` (whether or not it is there yet)."""
    _preset(preset)
    return cache_dir() / "embedded" / f"{preset}-g{GENERATOR_VERSION}"


def _sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _entries(folder: Path) -> list[str]:
    """The folder's entries the manifest covers (all but itself and its scratch file)."""
    return sorted(p.name for p in folder.iterdir()
                  if p.name != MANIFEST and not p.name.startswith(_SCRATCH))


def _write_json_atomic(path: Path, data: dict | list) -> None:
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


# a folder's tokenizer facts, remembered by content: $MIBENCH_CACHE/special-ids/<key>.json
SPECIAL_IDS = "special-ids"
_WEIGHTS = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".gguf", ".onnx")


def cached_special_ids(folder: Path, compute: Callable[[Path], frozenset[int]]
                       ) -> frozenset[int]:
    """The special token ids `compute(folder)` gives (the engines': checkpoint.special_ids of
    checkpoint.load_tokenizer), remembered under the hash of the folder's files but its
    weights and of transformers' and tokenizers' versions: loading a tokenizer imports
    transformers and torch (3 to 5 s on a 2-core CPU), which a JAX worker otherwise never
    needs. A cache that cannot be read or written is passed by (the ids computed as before)."""
    cached = _special_ids_file(Path(folder))
    if cached is not None and cached.is_file():
        with contextlib.suppress(OSError, ValueError, Unreadable):
            ids = json.loads(read_bounded(cached, MAX_JSON_BYTES))
            if isinstance(ids, list) and all(type(i) is int for i in ids):
                return frozenset(ids)
    ids = frozenset(compute(folder))
    if cached is not None:
        with contextlib.suppress(OSError):
            cached.parent.mkdir(parents=True, exist_ok=True)
            _write_json_atomic(cached, sorted(ids))
    return ids


def _special_ids_file(folder: Path) -> Path | None:
    """Where the folder's special ids are remembered; None when its files cannot be read
    or transformers is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        digest = hashlib.sha256(f"{version('transformers')} {version('tokenizers')}".encode())
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.name != MANIFEST and not path.name.endswith(_WEIGHTS):
                digest.update(f"\0{path.name}\0{path.stat().st_size}\0".encode())
                digest.update(path.read_bytes())
    except (OSError, PackageNotFoundError):
        return None
    return cache_dir() / SPECIAL_IDS / f"{digest.hexdigest()}.json"


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
        manifest = json.loads(read_bounded(Path(folder) / MANIFEST, MAX_JSON_BYTES))
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

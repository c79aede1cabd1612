"""Where `mibench compile` gets libtpu (the TPU compiler) without installing it into the
environment: a `libtpu` importable by JAX makes every JAX process try a TPU backend first
(and warn when there is no TPU), so it lives in its own folder and only the compile
workers load it (`TPU_LIBRARY_PATH`).

Found in this order: `MIBENCH_LIBTPU` (a `libtpu.so`, or a folder holding one, as
`pip install --target DIR libtpu==X` makes it); a `libtpu` package already installed in
this environment (a TPU host's `jax[tpu]`); the cache (`$MIBENCH_CACHE/libtpu/<version>`);
else it is installed there, once, with pip: the version that `jax[tpu]` pins for the
installed jax (jax 0.10.2: `libtpu==0.0.42.*`, a wheel of about 200 MB).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mibench.errors import MibenchError

ENV = "MIBENCH_LIBTPU"
INSTALL_TIMEOUT_S = 1800


@dataclasses.dataclass(frozen=True)
class LibTpuPath:
    path: Path  # the libtpu.so
    version: str | None
    source: str


def requirement() -> str:
    """The libtpu requirement of the installed jax's `tpu` extra, e.g. `libtpu==0.0.42.*`."""
    try:
        reqs = importlib.metadata.requires("jax") or []
    except importlib.metadata.PackageNotFoundError:
        raise MibenchError("jax is not installed", field="libtpu") from None
    for req in reqs:
        spec, _, marker = req.partition(";")
        if re.match(r"\s*libtpu\b", spec) and "tpu" in marker:
            return spec.replace(" ", "")
    raise MibenchError(f"jax {importlib.metadata.version('jax')} names no libtpu in its tpu "
                       f"extra; install one and set {ENV}=/path/to/libtpu.so", field="libtpu")


def _version_in(folder: Path) -> str | None:
    """The version of the libtpu dist-info next to (or above) a libtpu.so, if any."""
    for base in (folder, folder.parent):
        found = sorted(base.glob("libtpu-*.dist-info"))
        if found:
            return found[-1].name.removeprefix("libtpu-").removesuffix(".dist-info")
    return None


def _so_in(path: Path) -> Path | None:
    for candidate in (path, path / "libtpu.so", path / "libtpu" / "libtpu.so"):
        if candidate.is_file():
            return candidate
    return None


def cache_folder(req: str) -> Path:
    from mibench.engines import cache_dir

    name = re.sub(r"[^A-Za-z0-9.]+", "-", req.replace("==", "-").replace("*", "x")).strip("-")
    return Path(cache_dir()) / "libtpu" / name


def find(install: bool = True) -> LibTpuPath:
    """The libtpu to compile with (see the module doc); installs it when `install` and
    nothing else is found. A MibenchError naming `libtpu` (or `MIBENCH_LIBTPU`) otherwise."""
    given = os.environ.get(ENV)
    if given:
        so = _so_in(Path(given).expanduser())
        if so is None:
            raise MibenchError(f"{given} is neither a libtpu.so nor a folder holding one",
                               field=ENV)
        return LibTpuPath(so.resolve(), _version_in(so.parent), ENV)
    spec = importlib.util.find_spec("libtpu")
    if spec is not None and spec.submodule_search_locations:
        so = _so_in(Path(next(iter(spec.submodule_search_locations))))
        if so is not None:
            try:
                version = importlib.metadata.version("libtpu")
            except importlib.metadata.PackageNotFoundError:
                version = None
            return LibTpuPath(so, version, "installed package")
    req = requirement()
    folder = cache_folder(req)
    so = _so_in(folder)
    if so is not None:
        return LibTpuPath(so, _version_in(so.parent), "cache")
    if not install:
        raise MibenchError(f"{req} is not in {folder}", field="libtpu")
    _install(req, folder)
    so = _so_in(folder)
    if so is None:
        raise MibenchError(f"pip installed {req} into {folder} but it holds no libtpu.so",
                           field="libtpu")
    return LibTpuPath(so, _version_in(so.parent), "installed now")


@contextlib.contextmanager
def _lock(folder: Path):
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)  # another process installing the same: wait for it
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _install(req: str, folder: Path) -> None:
    """`pip install --no-deps --target` into a temporary folder, then renamed into place."""
    with _lock(folder):
        if _so_in(folder) is not None:  # installed while we waited
            return
        print(f"installing {req} into {folder} (once; about 200 MB)", file=sys.stderr)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-input",
                   "--disable-pip-version-check", "--quiet", "--target", str(tmp), req]
            try:
                done = subprocess.run(cmd, capture_output=True, text=True,
                                      timeout=INSTALL_TIMEOUT_S)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise MibenchError(f"cannot run pip to install {req}: {e}; install it "
                                   f"yourself and set {ENV}=/path/to/libtpu.so",
                                   field="libtpu") from None
            if done.returncode != 0:
                lines = [ln for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
                why = lines[-1].strip() if lines else f"exit {done.returncode}"
                raise MibenchError(f"pip could not install {req}: {why}; install it yourself "
                                   f"and set {ENV}=/path/to/libtpu.so", field="libtpu")
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def worker_env(lib: LibTpuPath) -> dict[str, str]:
    """The environment of a compile worker: this one, JAX's default backend the CPU, libtpu
    loaded from its own folder for the compile-only TPU devices, no metadata server asked."""
    env = dict(os.environ)
    env.update(TPU_LIBRARY_PATH=str(lib.path), JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1")
    return env

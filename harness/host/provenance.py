"""Where a run came from: git state, packages, devices, host, Python, argv, env vars."""

from __future__ import annotations

import functools
import os
import platform
import re
import sys
from pathlib import Path

from ..records import Devices, GitInfo, Provenance
from ..util import git_output
from .peak import cpu_model

ENV_PATTERN = re.compile(r"^(XLA_FLAGS|LIBTPU_INIT_ARGS|CUDA_VISIBLE_DEVICES|TPU_.*|JAX_.*|"
                         r"MIBENCH_.*|HF_HUB_OFFLINE)$")


def git_info(path: str | Path) -> GitInfo:
    """Commit, branch and dirty flag of the checkout containing `path` (None outside git)."""
    path = Path(path).resolve()
    commit = git_output(path, "rev-parse", "HEAD")
    if commit is None:
        return GitInfo(path=str(path))
    status = git_output(path, "status", "--porcelain", "--untracked-files=no")
    return GitInfo(path=git_output(path, "rev-parse", "--show-toplevel") or str(path),
                   commit=commit, branch=git_output(path, "rev-parse", "--abbrev-ref", "HEAD"),
                   dirty=bool(status) if status is not None else None)


def mibench_version() -> str:
    """The installed version, and the commit of the checkout mibench runs from (with
    `-dirty` when it has uncommitted changes), e.g. `0.1.0 (a7c4c24)`."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        text = version("mibench")
    except PackageNotFoundError:
        text = "unknown"
    here = Path(__file__).resolve().parents[2]
    commit = git_output(here, "describe", "--always", "--dirty", "--abbrev=7")
    return f"{text} ({commit})" if commit else text


def package_versions() -> dict[str, str | None]:
    """Installed versions (read once per process: they cannot change under it)."""
    return dict(_versions())


@functools.cache
def _versions() -> tuple[tuple[str, str | None], ...]:
    from mibench.engines import package_versions as read_versions

    return tuple(read_versions().items())


def device_info(env: dict | None = None) -> Devices:
    """Platform, kind and count of JAX's devices (from engines.env_info, or `env`, what a
    worker process reported)."""
    try:
        from mibench.engines import env_info

        d = (env or env_info())["devices"]
        return Devices(platform=d.get("platform"), kind=d.get("kind"), count=d.get("count"))
    except Exception:  # provenance must never fail a run
        return Devices()


def host_info() -> dict:
    return {"hostname": platform.node(), "system": platform.system(),
            "release": platform.release(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "processor": platform.processor() or None,
            "cpu_model": cpu_model()}


def relevant_env() -> dict[str, str]:
    return {k: v for k, v in sorted(os.environ.items()) if ENV_PATTERN.match(k)}


def collect(argv: list[str] | None = None, engine_repo: str | Path | None = None,
            devices: Devices | None = None) -> Provenance:
    """Everything but the config (the RunRecord holds the resolved config and its sha256)."""
    return Provenance(git=git_info(Path.cwd()),
                      engine_repo=git_info(engine_repo) if engine_repo else None,
                      packages=package_versions(), devices=devices or device_info(),
                      host=host_info(), python=sys.version.split()[0] + f" ({sys.executable})",
                      argv=list(sys.argv if argv is None else argv), env=relevant_env())

"""A scratch git repository built from this project's engines, with commits that change
them on purpose (slower by a known factor, scores moved): what the A/B tests and the gate
calibration measure `mibench ab` and `bisect` against."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from .. import util

SOURCES = ("engines", "mibench", "pyproject.toml")  # what a revision's worker imports


def git(repo: Path, *args: str) -> str:
    """git in the scratch repository, as a committer of its own."""
    return util.git(repo, "-c", "user.name=mibench", "-c", "user.email=mibench@localhost",
                    *args)


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", message, "--allow-empty")
    return git(repo, "rev-parse", "HEAD")


def copy_project(project: Path, repo: Path) -> None:
    """The project's engines (tracked and new files) into `repo`, a fresh git repository."""
    listed = subprocess.run(["git", "-C", str(project), "ls-files", "-co",
                             "--exclude-standard"], capture_output=True, text=True,
                            check=True).stdout.split()
    for name in listed:
        if name.split("/")[0] in SOURCES and (project / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(project / name, repo / name)
    git(repo, "init", "-q")


def slower(function: str, factor: float) -> str:
    """Source that, appended to the module defining `function`, makes every call of it
    take `factor` times as long (it sleeps for the extra time after the real work). Each
    wrapper binds the function it wraps at its definition (`_inner`), so that appending it
    twice stacks (a module-level alias would make the first wrapper call itself)."""
    return f'''

import time as _time


def {function}(*args, _inner={function}, **kwargs):
    t0 = _time.perf_counter()
    out = _inner(*args, **kwargs)
    _time.sleep({factor - 1!r} * (_time.perf_counter() - t0))
    return out
'''


def same_scores(function: str) -> str:
    """Source that, appended to the module defining `function` (a mode's scorer: an array
    of one row per item), gives every item the first item's scores: a mode that scores
    nothing (flashinfer#3434), for parity's `degenerate` check."""
    return f'''

import numpy as _np


def {function}(*args, _inner={function}, **kwargs):
    out = _np.asarray(_inner(*args, **kwargs))
    return _np.repeat(out[:1], len(out), axis=0)
'''


def allocating(function: str, nbytes: int) -> str:
    """Source that, appended to the module defining `function`, makes every call of it hold
    `nbytes` more host memory while it runs (touched, so resident, and freed after)."""
    return f'''

import numpy as _np


def {function}(*args, _inner={function}, **kwargs):
    _block = _np.ones({nbytes}, _np.uint8)
    try:
        return _inner(*args, **kwargs)
    finally:
        del _block
'''


def append(repo: Path, path: str, text: str) -> None:
    with open(repo / path, "a") as f:
        f.write(text)

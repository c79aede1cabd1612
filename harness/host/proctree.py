"""A process tree, read from /proc and stopped whole: every descendant of a process, those
that called `setsid` (a session and process group of their own) included, as long as
they stay in the tree. A process that is a child subreaper (Linux's
PR_SET_CHILD_SUBREAPER, `become_subreaper`) keeps its orphaned descendants in its tree:
when a server's process exits, the children it had are reparented to the subreaper, not
to init. Standard library only: the reaper (harness/run/reaper.py) imports it beside
every launched server.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None
    when it is gone: with the pid it names one process, whatever pids are reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process now (zombies included)."""
    out = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            out[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return out


def descendants(pid: int) -> list[int]:
    """Every process below `pid` now, parents before their children."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo += children.get(p, [])
    return out


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux); False where the system cannot."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _signal_all(pids: dict[int, str | None], sig: int) -> None:
    """`sig` to each process still the one it was (same start time), and to its group."""
    for pid, started in pids.items():
        if start_time(pid) != started:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if os.getpgid(pid) == pid:  # a group leader: the setsid kind, or the server
                os.killpg(pid, sig)


def _running(pids: dict[int, str | None]) -> list[int]:
    """The pids still naming their process and not yet zombies."""
    out = []
    for pid, started in pids.items():
        if start_time(pid) != started:
            continue
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            out.append(pid)
    return out


def stop_tree(root: int, sig: int, grace_s: float, reap=lambda: None) -> None:
    """`sig` to every descendant of `root` (and their groups), then SIGKILL to every one
    still running after `grace_s`, the tree read again first (what forked meanwhile is
    in it). `reap` collects exited children (the subreaper's own zombies) while waiting."""
    tree = {p: start_time(p) for p in descendants(root)}
    _signal_all(tree, sig)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        reap()
        if not _running(tree) and not _running({p: start_time(p) for p in descendants(root)}):
            break
        time.sleep(0.05)
    for _ in range(3):  # a process that forks while it is killed: read the tree again
        tree.update({p: start_time(p) for p in descendants(root)})
        _signal_all(tree, signal.SIGKILL)
        reap()
        if not _running(tree):
            break
        time.sleep(0.05)

"""A worker process seen from its parent: how often it is polled, how much of its output
is kept, its resident set, and why it died. Shared by the engine and compile workers."""

from __future__ import annotations

import signal

POLL_S = 0.02
OUTPUT_TAIL = 2000


class WorkerDied(Exception):
    """The worker ended or was killed before answering; the message says why."""


class Interrupted(Exception):
    """Raised in an engine worker by SIGTERM, which its parent sends when the run is
    interrupted (Ctrl-C, SIGTERM) mid-case: the case ends as a failed record of what it
    measured before, and the parent keeps it (harness/run/worker.py)."""


def rss_of(pid: int) -> int | None:
    """Resident set of a process (Linux /proc), None where it cannot be read."""
    try:
        with open(f"/proc/{pid}/status") as f:
            kib = next(line.split()[1] for line in f if line.startswith("VmRSS:"))
        return int(kib) * 1024
    except (OSError, StopIteration):
        return None


def death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        name = signal.Signals(-exitcode).name
        hint = " (out of memory?)" if -exitcode == signal.SIGKILL else ""
        return f"the worker was killed by {name}{hint}"
    return f"the worker exited with code {exitcode}"

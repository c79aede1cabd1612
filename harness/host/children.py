"""A worker process seen from its parent: how it is started (`Child`), how often it is
polled, how much of its output is kept, its resident set, and why it died. Shared by the
engine and compile workers (harness/run/worker.py, harness/compile/worker.py)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection

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


class Child:
    """A worker process: a fresh interpreter (`python -m mibench.harness.run.bootstrap FD
    ARGS...`, so it imports nothing of the parent's main module) talking over a socket pair
    (`conn`), its output in a log file (`log`). Subclasses answer `_fail(cause)` (stop the
    process and raise WorkerDied); `role` names the process in their messages."""

    role = "worker"

    def __init__(self, args: list[str], log_prefix: str, env: dict[str, str] | None = None):
        fd, self.log = tempfile.mkstemp(prefix=log_prefix, suffix=".log")
        mine, theirs = socket.socketpair()
        with open(fd, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mibench.harness.run.bootstrap", str(theirs.fileno()),
                 *args], pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT)
        theirs.close()
        self.conn = Connection(mine.detach())

    def _fail(self, cause: str):
        raise NotImplementedError

    def _receive(self):
        """The process's next message (one is waiting); its end is a failure."""
        try:
            return self.conn.recv()
        except (EOFError, OSError):
            self._fail(death(self._exitcode()))

    def _watch(self, max_rss: int | None) -> None:
        """Between messages: a process that ended, or whose resident set passed `max_rss`,
        is a failure."""
        if self.proc.poll() is not None:
            self._fail(death(self.proc.returncode))
        rss = rss_of(self.proc.pid) if max_rss else None
        if rss is not None and rss > max_rss:
            self._fail(f"the {self.role}'s resident set reached {rss / 2**20:.0f} MiB, past "
                       f"runs.max_rss = {max_rss / 2**20:.0f} MiB")

    def _exitcode(self) -> int | None:
        try:
            return self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

"""Servers under test, launched by mibench: one per distinct launch (command, environment,
server arguments), started on a free loopback port when a case first needs it, stopped
when no later case or parity check needs it, and on every way out of a run.

A server is a resource (`Server`, a context manager): its process starts in a session of
its own (its own process group, so Ctrl-C at the terminal does not reach it), its output
goes to a log beside the artifact, and it is ready when its probe (`GET ready.path`)
answers 200 before `ready.timeout_s`. Stopping it sends the stop signal to the whole
group, waits `stop.grace_s`, then SIGKILLs the group.

If mibench itself is killed (kill -9), its servers must not outlive it: each server gets a
reaper (`python -m mibench.harness.run.reaper`), a small process in a session of its own
that blocks reading a pipe whose only writer is mibench. When mibench dies the kernel
closes the pipe, the reaper reads EOF and stops the server's group (the same stop policy),
after checking that the group's leader is still the process it was given (its start time
in /proc), so a recycled pid is never signalled.

Each server gets a temporary folder of its own as `TMPDIR` (unless its launch sets one):
servers leave files there (sglang-jax: five ZMQ endpoints per launch, never removed), and
the folder goes with the server, at its stop or by its reaper.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mibench.errors import MibenchError
from mibench.harness.config.cases import LaunchSpec
from mibench.harness.util import git_output

LOG_TAIL = 2000  # characters of a failed server's log carried into the case's error
HOST = "127.0.0.1"


class ServerFailed(MibenchError):
    """A launched server did not start, died, or did not become ready; the message ends
    with the last lines of its log."""


def free_port(host: str = HOST) -> int:
    """A port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None
    when it is gone: with the pid it names one process, whatever pids are reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def stop_group(pgid: int, sig: int, grace_s: float, leader: subprocess.Popen | None = None
               ) -> None:
    """`sig` to the process group, then SIGKILL to it after `grace_s` if its leader (or,
    without a handle, any member) is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if leader is not None and leader.poll() is not None and not _group_alive(pgid):
            break
        if leader is None and not _group_alive(pgid):
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if leader is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            leader.wait(5)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclasses.dataclass
class Started:
    """What a started server is: its address, its exact command and how it came up."""

    base_url: str
    command: list[str]
    env: dict[str, str]  # the variables the launch set (not the whole environment)
    startup_s: float
    log: Path
    pid: int


class Server:
    """One launched server: `start()` (or `with Server(...)`) brings it up and returns
    `Started`; `stop()` takes its whole process group down (also at exit of `with`)."""

    def __init__(self, launch: LaunchSpec, model_folder: str, dtype: str, log: Path,
                 python: str | None = None, extra_env: dict[str, str] | None = None):
        self.launch, self.model_folder, self.dtype, self.log = launch, model_folder, dtype, log
        self.python = python or launch.interpreter() or sys.executable
        self.extra_env = dict(extra_env or {})
        self.proc: subprocess.Popen | None = None
        self.reaper: subprocess.Popen | None = None
        self.started: Started | None = None
        self.tmp: str | None = None  # the server's TMPDIR, removed with it

    def __enter__(self) -> Started:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def command(self, port: int) -> list[str]:
        return self.launch.command_for(port=port, host=HOST, model=self.model_folder,
                                       dtype=self.dtype, python=self.python)

    def start(self) -> Started:
        port = free_port()
        cmd = self.command(port)
        env = {**self.launch.environment(), **self.extra_env}
        self.tmp = tempfile.mkdtemp(prefix="mibench-server-")
        own_tmp = {"TMPDIR": self.tmp} if "TMPDIR" not in env else {}
        self.log.parent.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        with open(self.log, "ab") as out:
            out.write(f"$ {' '.join(cmd)}\n".encode())
            out.flush()
            try:
                self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL,
                                             env={**os.environ, **own_tmp, **env},
                                             cwd=self.launch.cwd, start_new_session=True)
            except OSError as e:
                self._remove_tmp()
                raise ServerFailed(f"cannot start {cmd[0]!r}: {e.strerror or e}",
                                   field="launch.command") from None
        self.reaper = self._reaper(self.proc.pid)
        base_url = f"http://{HOST}:{port}"
        try:
            self._wait_ready(base_url)
        except BaseException:
            self.stop()
            raise
        self.started = Started(base_url=base_url, command=cmd, env=env,
                               startup_s=time.perf_counter() - t0, log=self.log,
                               pid=self.proc.pid)
        return self.started

    def _reaper(self, pid: int) -> subprocess.Popen:
        """The reaper of this server's group (module docstring)."""
        return subprocess.Popen(
            [sys.executable, "-m", "mibench.harness.run.reaper", str(pid),
             start_time(pid) or "", self.launch.stop_signal, str(self.launch.grace_s),
             self.tmp or ""],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def _wait_ready(self, base_url: str) -> None:
        from mibench.engines import HttpClient

        client = HttpClient(base_url, timeout_s=5.0)
        deadline = time.monotonic() + self.launch.ready_timeout_s
        try:
            while True:
                if self.proc.poll() is not None:
                    raise ServerFailed(f"the server exited with code {self.proc.returncode} "
                                       f"before it was ready; its log {self.log} ends: "
                                       f"{self.log_tail()}", field="launch")
                reply = client.request("GET", self.launch.ready_path)
                if reply.status == 200:
                    return
                if time.monotonic() > deadline:
                    raise ServerFailed(f"not ready after {self.launch.ready_timeout_s:g} s "
                                       f"(GET {self.launch.ready_path}: {reply.status}); its "
                                       f"log {self.log} ends: {self.log_tail()}",
                                       field="launch.ready.timeout_s")
                time.sleep(self.launch.ready_interval_s)
        finally:
            client.close()

    def log_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace").strip()
        except OSError:
            return ""
        return text[-LOG_TAIL:]

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc.pid, getattr(signal, self.launch.stop_signal),
                       self.launch.grace_s, self.proc)
            self.proc = None
        if self.reaper is not None:
            with contextlib.suppress(OSError):
                self.reaper.stdin.close()  # EOF: the reaper finds the group gone and leaves
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.reaper.wait(10)
            self.reaper = None
        self._remove_tmp()

    def _remove_tmp(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def package_version(python: str, package: str, env: dict[str, str]) -> str | None:
    """`package`'s version as the server's interpreter sees it (its environment applied:
    a source tree first on PYTHONPATH changes what is imported, not the installed
    distribution's version)."""
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\n"
            "except m.PackageNotFoundError: pass")
    try:
        out = subprocess.run([python, "-c", code, package], capture_output=True, text=True,
                             env={**os.environ, **env}, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def source_commit(folder: str | Path) -> dict | None:
    """The git commit (and dirty flag) of a server's source folder, None outside git."""
    commit = git_output(folder, "rev-parse", "HEAD")
    if commit is None:
        return None
    status = git_output(folder, "status", "--porcelain", "--untracked-files=no")
    return {"path": str(Path(folder).resolve()), "commit": commit, "dirty": bool(status)}

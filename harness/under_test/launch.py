"""Servers under test, launched by mibench: one per distinct launch (command, environment,
server arguments), started on a free loopback port when a case first needs it, stopped
when no later case or parity check needs it, and on every way out of a run.

A server is a resource (`Server`, a context manager): its process starts in a session of
its own (so Ctrl-C at the terminal does not reach it), its output goes to a log beside the
artifact, and it is ready when its probe (`GET ready.path`) answers 200 before
`ready.timeout_s`: each probe is one request whose whole answer must come within what is
left of that time (at most 5 s), so a server that drips its answer cannot stretch it.

Its parent is not mibench but its reaper (`python -m mibench.harness.run.reaper`), a small
process in a session of its own that starts the server, is the child subreaper of its whole
process tree (children that call `setsid` included: orphaned, they come to the reaper, not
to init) and blocks reading a pipe whose only writer is mibench. Stopping the server closes
that pipe; so does the kernel when mibench dies in any way, kill -9 included. Either way the
reaper sends the stop signal to every process of the tree, waits `stop.grace_s`, SIGKILLs
what is left, and exits (harness/run/reaper.py, harness/host/proctree.py).

Each server gets a temporary folder of its own as `TMPDIR` (unless its launch sets one):
servers leave files there (sglang-jax: five ZMQ endpoints per launch, never removed), and
the folder goes with the server, by its reaper.

A failed server's log is read from its end (LOG_TAIL characters), whatever its size.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from mibench.errors import MibenchError

from ..config.server import ServerLaunch
from ..host.proctree import descendants
from ..util import git_output, tail_of

LOG_TAIL = 2000  # characters of a failed server's log carried into the case's error
HOST = "127.0.0.1"
PROBE_S = 5.0  # the most one ready probe may take
REAPER_START_S = 60.0  # the most the reaper may take to answer (a Python start, busy machine)


class ServerFailed(MibenchError):
    """A launched server did not start, died, or did not become ready; the message ends
    with the last lines of its log."""


def free_port(host: str = HOST) -> int:
    """A port nothing listens on now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Started:
    """What a started server is: its address, its exact command and how it came up."""

    base_url: str
    command: list[str]
    env: dict[str, str]  # the variables the launch set (not the whole environment)
    startup_s: float
    log: Path
    pid: int


class Child:
    """The server as its reaper reports it: `pid` (from its first line), then `poll()` and
    `returncode` once it says the server exited (or it is gone itself)."""

    def __init__(self, reaper: subprocess.Popen):
        self.reaper, self.pid, self.returncode = reaper, None, None
        self._lines: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name="mibench-reaper-lines")
        self._arrived = threading.Event()
        self._reader.start()

    def _read(self) -> None:
        for line in self.reaper.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if "exit" in message:
                self.returncode = message["exit"]
            self._lines.append(message)
            self._arrived.set()
        self._arrived.set()

    def first(self, timeout: float) -> dict:
        """The reaper's first line: {"pid": N} or {"error": ..., "filename": ...}."""
        if not self._arrived.wait(timeout) or not self._lines:
            code = self.reaper.poll()
            return {"error": f"its reaper gave no answer within {timeout:g} s" if code is None
                    else f"its reaper exited with code {code}", "filename": None}
        first = self._lines[0]
        self.pid = first.get("pid")
        return first

    def poll(self) -> int | None:
        if self.returncode is None and self.reaper.poll() is not None:
            self._reader.join(1)
            if self.returncode is None:
                self.returncode = -signal.SIGKILL  # the reaper is gone, the server with it
        return self.returncode


class Server:
    """One launched server: `start()` (or `with Server(...)`) brings it up and returns
    `Started`; `stop()` takes its whole process group down (also at exit of `with`)."""

    def __init__(self, launch: ServerLaunch, model_folder: str, dtype: str, log: Path,
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
        self.proc = self._launch(cmd, {**os.environ, **own_tmp, **env})
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

    def _launch(self, cmd: list[str], env: dict[str, str]) -> Child:
        """The server started by its reaper (module docstring); a ServerFailed naming
        launch.cwd or launch.command when it cannot start."""
        self.reaper = subprocess.Popen(
            [sys.executable, "-m", "mibench.harness.run.reaper"], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        spec = {"command": cmd, "env": env, "cwd": self.launch.cwd, "log": str(self.log),
                "signal": self.launch.stop.signal, "grace_s": self.launch.stop.grace_s,
                "tmp": self.tmp}
        child = Child(self.reaper)
        try:
            self.reaper.stdin.write((json.dumps(spec) + "\n").encode())
            self.reaper.stdin.flush()
            first = child.first(REAPER_START_S)
        except OSError as e:
            first = {"error": f"its reaper did not start ({e})", "filename": None}
        if "pid" in first:
            return child
        self.stop()
        missing = first.get("filename")
        if missing is not None and self.launch.cwd and missing == self.launch.cwd:
            raise ServerFailed(f"cannot start the server in {missing!r}: {first['error']}",
                               field="launch.cwd")
        raise ServerFailed(f"cannot start {cmd[0]!r}: {first.get('error')}",
                           field="launch.command")

    def _wait_ready(self, base_url: str) -> None:
        """Probe until 200, each probe whole within what is left of ready.timeout_s (at
        most PROBE_S); a ServerFailed once the server exited or the time is out."""
        from mibench.engines import HttpClient

        deadline = time.monotonic() + self.launch.ready.timeout_s
        while True:
            if self.proc.poll() is not None:
                raise ServerFailed(f"the server exited with code {self.proc.returncode} "
                                   f"before it was ready; its log {self.log} ends: "
                                   f"{self.log_tail()}", field="launch")
            left = deadline - time.monotonic()
            reply = None
            if left > 0:
                client = HttpClient(base_url, timeout_s=min(PROBE_S, left))
                try:
                    reply = client.request("GET", self.launch.ready.path)
                finally:
                    client.close()
                if reply.status == 200:
                    return
            if time.monotonic() >= deadline:
                got = reply.status if reply is not None else "no probe"
                raise ServerFailed(f"not ready after {self.launch.ready.timeout_s:g} s "
                                   f"(GET {self.launch.ready.path}: {got}); its "
                                   f"log {self.log} ends: {self.log_tail()}",
                                   field="launch.ready.timeout_s")
            time.sleep(min(self.launch.ready.interval_s,
                           max(0.0, deadline - time.monotonic())))

    def log_tail(self) -> str:
        """The log's last LOG_TAIL characters, read from its end."""
        return tail_of(self.log, LOG_TAIL)

    def stop(self) -> None:
        """Close the reaper's pipe: it stops the server's whole tree and exits. A reaper
        that does not exit in time is killed, and the tree with it, from here."""
        self.proc = None
        if self.reaper is not None:
            with contextlib.suppress(OSError):
                self.reaper.stdin.close()
            try:
                self.reaper.wait(self.launch.stop.grace_s + 15)
            except subprocess.TimeoutExpired:
                tree = descendants(self.reaper.pid)
                self.reaper.kill()
                self.reaper.wait()
                for pid in tree:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                self.reaper.stdout.close()
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

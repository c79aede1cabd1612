"""`python -m mibench.harness.run.reaper`: the parent of one launched server
(harness/under_test/launch.py), which it starts, watches and stops as a whole process tree.

mibench writes one JSON line to its stdin: the server's `command`, `env` (the whole
environment), `cwd`, `log` (its output, appended), the stop `signal` and `grace_s`, and
`tmp` (the server's temporary folder). The reaper makes itself a child subreaper, starts
the server in a session of its own, and answers one JSON line on stdout: `{"pid": N}`, or
`{"error": ..., "filename": ...}` when it could not start it (a missing interpreter or
cwd). When the server's own process exits it writes `{"exit": CODE}`.

Then it blocks reading stdin, a pipe whose only writer is mibench. EOF comes when mibench
closes it (to stop the server) or dies in any way, kill -9 included. Then it stops its whole
tree of descendants: the server, its children, and those that left the server's process
group or session (`setsid`), which as orphans were reparented to the reaper rather than to
init (harness/host/proctree.py): the stop signal to each, SIGKILL after `grace_s`. It then
removes `tmp` and exits. Imports nothing heavy: it runs beside every launched server.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys

from ..host.proctree import become_subreaper, stop_tree

TICK_S = 0.2  # how often the reaper looks at its children between reads


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def start(spec: dict) -> subprocess.Popen | None:
    """The server, started with its output appended to its log; None (said) on failure."""
    try:
        with open(spec["log"], "ab") as log:
            return subprocess.Popen(spec["command"], stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=spec["env"],
                                    cwd=spec.get("cwd"), start_new_session=True)
    except OSError as e:
        say({"error": e.strerror or str(e), "filename": e.filename})
        return None


def reap(server: subprocess.Popen, said: list) -> None:
    """Collect every exited child (orphans adopted as a subreaper too); say the server's
    exit code once."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid == server.pid and not said:
            server.returncode = os.waitstatus_to_exitcode(status)
            said.append(True)
            say({"exit": server.returncode})


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is mibench's to handle
    spec = json.loads(sys.stdin.buffer.readline() or b"{}")
    become_subreaper()
    server = start(spec)
    if server is None:
        return
    say({"pid": server.pid})
    said: list = []
    stdin = sys.stdin.buffer.raw
    with selectors.DefaultSelector() as sel:
        sel.register(stdin, selectors.EVENT_READ)
        while True:
            if sel.select(TICK_S) and not os.read(stdin.fileno(), 4096):
                break  # EOF: stop (mibench closed the pipe, or is gone)
            reap(server, said)
    stop_tree(os.getpid(), getattr(signal, spec.get("signal", "SIGTERM")),
              float(spec.get("grace_s", 5.0)), lambda: reap(server, said))
    reap(server, said)
    if spec.get("tmp"):
        shutil.rmtree(spec["tmp"], ignore_errors=True)
    with contextlib.suppress(OSError):
        sys.stdout.close()


if __name__ == "__main__":
    main()

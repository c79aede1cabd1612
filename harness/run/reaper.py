"""`python -m mibench.harness.run.reaper PID START SIGNAL GRACE_S [TMP]`: stop a launched
server's process group when mibench goes away (harness/run/servers.py), and remove its
temporary folder TMP.

It blocks reading stdin, a pipe whose only writer is the mibench process that launched
the server. EOF comes when that process closes the pipe (it stopped the server itself) or
dies in any way, kill -9 included. Then, if PID still names the process that started at
START (clock ticks since boot, /proc/PID/stat), SIGNAL goes to its group, and SIGKILL
after GRACE_S. Imports nothing heavy: it runs beside every launched server."""

from __future__ import annotations

import shutil
import signal
import sys


def main(pid: int, start: str, sig: str, grace_s: float, tmp: str = "") -> None:
    from mibench.harness.run.servers import start_time, stop_group

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is mibench's to handle
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except OSError:
        pass
    if start and start_time(pid) == start:
        stop_group(pid, getattr(signal, sig), grace_s)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4]), *sys.argv[5:6])

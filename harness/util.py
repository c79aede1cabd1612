"""Small helpers every layer of the harness may use (they import nothing of it): git, the
time stamp of records, a duration from the command line, byte sizes for people, the tail
of a log, SIGTERM as Ctrl-C."""

from __future__ import annotations

import datetime as dt
import re
import signal
import subprocess
from pathlib import Path

from mibench.errors import MibenchError


def git_output(path: str | Path, *args: str, stdin: str | None = None) -> str | None:
    """Stripped stdout of `git -C path ARGS` ("" when it prints nothing), fed `stdin`; None
    when git fails or is missing. Never cached: a long-lived process must see new
    commits."""
    try:
        out = subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True,
                             input=stdin, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git(repo: str | Path, *args: str) -> str:
    """Stripped stdout of `git -C repo ARGS`; a MibenchError naming `git` with git's last
    line of stderr when it fails."""
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise MibenchError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else
                           f"git {' '.join(args)} failed", field="git")
    return out.stdout.strip()


DURATION_UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str, field: str = "--budget") -> float:
    """`90m`, `2h`, `45s` or seconds (`3600`) -> seconds; else a MibenchError naming
    `field`."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not found:
        raise MibenchError(f"not a duration: {text!r} (e.g. 90m, 2h, 600s)", field=field)
    return float(found.group(1)) * DURATION_UNITS[found.group(2) or "s"]


def now() -> str:
    """UTC now, ISO 8601 to the millisecond: the time stamps of every record."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def gib(n: float | None) -> str:
    """Bytes for people: 1.5 GiB, 300.0 MiB, 12.0 KiB; `-` for None."""
    if n is None:
        return "-"
    for unit, size in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n / 1024:.1f} KiB"



def tail_of(path: str | Path, chars: int) -> str:
    """The last `chars` characters of a log (stripped), read from its end whatever its
    size; "" when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4 * chars))  # UTF-8: at most 4 bytes a character
            text = f.read().decode("utf-8", errors="replace").strip()
    except OSError:
        return ""
    return text[-chars:]


def sigterm_as_ctrl_c() -> None:
    """From now on SIGTERM (`kill`, a cancelled or timed-out CI job) raises
    KeyboardInterrupt in the main thread: the same clean stop as Ctrl-C."""
    signal.signal(signal.SIGTERM, _as_ctrl_c)


def _as_ctrl_c(signum, frame) -> None:
    raise KeyboardInterrupt

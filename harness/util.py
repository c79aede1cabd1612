"""Small helpers every layer of the harness may use (they import nothing of it): git, the
time stamp of records and its parsing, a duration from the command line, byte sizes and
compiled costs for people, the tail of a log, SIGTERM as Ctrl-C."""

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


def parse_time(iso: str) -> dt.datetime | None:
    """A record's ISO 8601 time stamp (`Z` or an offset; none read as UTC) as an aware
    datetime; None when it is not one."""
    try:
        t = dt.datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except (ValueError, AttributeError, TypeError):
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.UTC)


KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4
# The scales of byte sizes for people, one a context: (unit, its bytes, format, from how
# many bytes on it is used), largest first; the last unit takes whatever is left.
MESSAGES = (("TiB", TIB, ".1f", TIB), ("GiB", GIB, ".1f", GIB), ("MiB", MIB, ".1f", MIB),
            ("KiB", KIB, ".1f", 0))  # errors and estimates: 1.5 GiB, 300.0 MiB, 12.0 KiB
REPORTS = (("GiB", GIB, ".1f", GIB), ("MiB", MIB, ".1f", MIB), ("KiB", KIB, ".1f", KIB),
           ("B", 1, ".0f", 0))  # report cells: 1.5 GiB ... 512 B, never TiB
LIMITS = (("GiB", GIB, ".2f", GIB / 10), ("MiB", MIB, ".1f", MIB / 10),
          ("KiB", KIB, ".1f", KIB), ("bytes", 1, "g", 0))  # serve limits: 0.50 GiB, 4.0 KiB


def byte_size(n: float | None, scale=MESSAGES) -> str:
    """`n` bytes in the first unit of `scale` that it reaches; `-` for None."""
    if n is None:
        return "-"
    for unit, size, spec, start in scale[:-1]:
        if n >= start:
            return f"{n / size:{spec}} {unit}"
    unit, size, spec, _ = scale[-1]
    return f"{n / size:{spec}} {unit}"


def short_number(v: float | int | None, unit: str = "") -> str:
    """A compiled cost for people: `1.234G` (FLOPs, counts), `12.50 MiB` (unit "B"); `-`
    for None."""
    if v is None:
        return "-"
    if unit == "B":
        return f"{v / 2**20:,.2f} MiB"
    for div, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3f}{suffix}"
    return f"{v:g}"


def gib(n: float | None) -> str:
    """Bytes for people: 1.5 GiB, 300.0 MiB, 12.0 KiB; `-` for None."""
    return byte_size(n, MESSAGES)



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

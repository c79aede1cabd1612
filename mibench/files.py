"""Reading an input file, bounded (neutral, as mibench/errors.py: the engines, the harness
and the workloads all read through it): `read_bounded` refuses what is not a regular file
and what is larger than its reader takes, before reading it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from .errors import MibenchError, closest


class Unreadable(MibenchError):
    """An input file that cannot be read (`read_bounded`); `why` is the reason alone."""

    def __init__(self, why: str, field: str):
        self.why = why
        super().__init__(why, field=field)


def read_bounded(path: str | Path, limit: int, what: str = "file",
                 field: str | None = None) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or an Unreadable naming it
    (`field`, default the path): no such `what`, a folder, not a regular file (a FIFO, a
    device such as /dev/zero, a socket: opened without blocking and never read, so it
    neither hangs nor grows), larger than `limit` (by its size, or by what a growing file
    gave past it), a symbolic link loop, or the system's reason. Every reader of an input
    file goes through it: configs, reference figures, requests files and requests,
    artifacts and indexes, a checkpoint's config and index."""
    shown = field or str(path)
    a = "an" if what[:1] in "aeiou" else "a"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise Unreadable(f"no such {what}{nearby(path)}", shown) from None
    except OSError as e:
        if e.errno == errno.EISDIR:
            raise Unreadable(f"is a folder, not {a} {what}", shown) from None
        raise Unreadable(_why(e), shown) from None
    try:
        mode = os.fstat(fd)
        if stat.S_ISDIR(mode.st_mode):
            raise Unreadable(f"is a folder, not {a} {what}", shown)
        if not stat.S_ISREG(mode.st_mode):
            raise Unreadable(f"is not a regular file (a FIFO, a device or a socket), so it "
                             f"is not read as {a} {what}", shown)
        if mode.st_size > limit:
            raise Unreadable(f"is {mode.st_size} bytes, more than the {limit} {a} {what} may "
                             "have", shown)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise Unreadable(f"grew past the {limit} bytes {a} {what} may have while it was "
                             "read", shown)
        return b"".join(chunks)
    except OSError as e:
        raise Unreadable(_why(e), shown) from None
    finally:
        os.close(fd)


def nearby(path: str | Path) -> str:
    """`; did you mean 'configs/cpu.yaml'?`: the names in the folder of a missing `path`
    closest to its name (as the path was written), else ''."""
    p = Path(path)
    try:
        names = os.listdir(p.parent)
    except OSError:
        return ""
    close = [str(p.with_name(n)) for n in closest(p.name, names)]
    return f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""


def nearby_if_absent(path: str | Path) -> str:
    """`nearby(path)` when nothing is at `path` (a folder that is not one of ours: '')."""
    return "" if os.path.lexists(path) else nearby(path)


LOOP = "is a symbolic link loop (a link that leads back to itself), so it names no file"


def _why(e: OSError) -> str:
    if e.errno == errno.ELOOP:
        return LOOP
    return f"cannot read: {e.strerror or type(e).__name__}"


def resolved(path: str | Path, field: str | None = None) -> Path:
    """`path` made absolute with its links followed (Path.resolve), or an Unreadable naming
    it (`field`, default the path) when a link loops (Python 3.11 raises RuntimeError
    there, later ones OSError) or the system refuses."""
    try:
        return Path(path).resolve()
    except RuntimeError:
        raise Unreadable(LOOP, field or str(path)) from None
    except (OSError, ValueError) as e:  # ValueError: a NUL byte
        why = _why(e) if isinstance(e, OSError) else f"not a usable path: {e}"
        raise Unreadable(why, field or str(path)) from None

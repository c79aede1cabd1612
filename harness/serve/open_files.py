"""`mibench serve`'s open files (harness/serve/app.py; its connections:
harness/serve/connections.py): `open_files` raises the soft limit to the hard one at
start-up and refuses a `--max-connections` whose 3 x sockets (slots, probation, lingering)
+ FILES_RESERVE the hard limit cannot hold; a batch of connections accepted at once may
still pass it for a moment, and there `ListeningSocket` (asyncio) and libuv (uvloop) close
what waits instead of spinning."""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import socket

from mibench.errors import MibenchError

# open files besides the connections' sockets: the listening socket, the event loop's own,
# libuv's reserve for EMFILE, the engine's, the log (an idle server of `tiny`: 16)
FILES_RESERVE = 64


def open_files(max_connections: int) -> tuple[int, int]:
    """Raise this process's soft limit on open files to its hard one, so that accepting
    does not meet EMFILE (where a crowd of sockets would keep the server at it); (the soft
    limit now, what the connections need: 3 x --max-connections sockets, its slots, those on
    probation and those lingering, + FILES_RESERVE). A MibenchError naming
    --max-connections when even the hard limit cannot hold that."""
    need = 3 * max_connections + FILES_RESERVE
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < need:
        raise MibenchError(f"{max_connections} connections need up to {need} open files (3 x "
                           f"--max-connections: slots, probation, lingering; + "
                           f"{FILES_RESERVE}), more than this process's hard limit of {hard} "
                           "(ulimit -Hn): lower --max-connections or raise that limit",
                           field="--max-connections")
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 4 * need)
    if soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):  # macOS caps it below an infinite hard limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, need), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0], need


class ListeningSocket(socket.socket):
    """A listening socket whose `accept` meets the open-files limit (EMFILE, ENFILE) as
    libuv does: a descriptor kept in reserve is freed, the connections waiting are accepted
    and closed at once (their clients see a reset and may try again), the reserve is taken
    back, and `accept` says nothing is waiting (BlockingIOError). asyncio's loop then
    neither logs nor spins: Python 3.11's `_accept_connection` went on calling accept after
    EMFILE and scheduled a retry for each call (a server at 100% of a CPU that accepted
    nothing more, measured). uvloop takes the descriptor and does the same itself."""

    _reserve: int | None = None

    def listen(self, backlog: int) -> None:
        super().listen(backlog)
        if self._reserve is None:
            self._reserve = os.open(os.devnull, os.O_RDONLY)

    def accept(self):
        try:
            return super().accept()
        except OSError as e:
            if e.errno not in (errno.EMFILE, errno.ENFILE) or self._reserve is None:
                raise
        os.close(self._reserve)
        self._reserve = None
        try:
            while True:
                fd, _ = self._accept()
                os.close(fd)
        except OSError:  # nothing more waiting (or the limit again)
            pass
        finally:
            with contextlib.suppress(OSError):
                self._reserve = os.open(os.devnull, os.O_RDONLY)
        raise BlockingIOError(errno.EAGAIN, "at the open-files limit: the connections "
                                            "waiting were closed")

    def close(self) -> None:
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
        super().close()

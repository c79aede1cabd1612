"""The HTTP transport of the `http` engine and the harness's load generator (stdlib
`http.client`, one keep-alive connection per client). What is sent and how an answer is
read is a wire's (engines/wires/); this module only moves bytes.

`HttpClient.request` never raises for a request that got no HTTP answer: the `Reply` then
carries a status of `refused`, `timeout` or `connection` and the reason, so a load
generator counts it as a failed request; an answer longer than `max_response_bytes`
(MAX_RESPONSE_BYTES) is `oversized`, refused from its Content-Length or as soon as reading
passes the bound, never read whole.

`timeout_s` bounds the whole request (connecting, sending, the server's work and reading
the whole answer), not each socket read: a server that drips its answer a byte at a time
is cut off at the deadline. One watchdog thread (`Deadlines`) shuts the socket of a request
past its deadline down, which ends whatever read or write is blocked on it.
"""

from __future__ import annotations

import dataclasses
import heapq
import http.client
import itertools
import json
import socket
import threading
import time
import urllib.parse

from mibench.errors import MibenchError

DEFAULT_TIMEOUT_S = 60.0
# what a status of a request that got no HTTP response is called
REFUSED, TIMEOUT, CONNECTION = "refused", "timeout", "connection"
OVERSIZED = "oversized"  # an answer longer than the client's bound, not read whole
# the longest answer read: 4,096 items x 100 labels at 25 characters a score is 10 MiB
MAX_RESPONSE_BYTES = 64 * 1024**2


@dataclasses.dataclass(frozen=True)
class Reply:
    """What came back for one request: `status` is the HTTP status, or `refused`,
    `timeout`, `connection` when no response came; `body` the response's bytes, or the
    failure's reason."""

    status: int | str
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status == 200

    def text(self, limit: int | None = None) -> str:
        text = self.body.decode("utf-8", errors="replace")
        return text if limit is None or len(text) <= limit else text[:limit] + "..."


def parse_base_url(url) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of `http://HOST[:PORT][/PREFIX]`, or a
    MibenchError naming `base_url`."""
    if not isinstance(url, str) or not url:
        raise MibenchError(f"must be a URL like http://127.0.0.1:8000, got {url!r}",
                           field="base_url")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise MibenchError(f"{url!r} is not a URL: {e}", field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MibenchError(f"expected http://HOST[:PORT] or https://..., got {url!r}",
                           field="base_url")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise MibenchError(f"expected http://HOST[:PORT][/PREFIX] without a query, fragment "
                           f"or user, got {url!r}", field="base_url")
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path.rstrip("/")


class _Watch:
    """One request's deadline: `expired` once the watchdog cut its socket."""

    def __init__(self, when: float, conn: http.client.HTTPConnection):
        self.when, self.conn, self.done, self.expired = when, conn, False, False


class Deadlines:
    """The watchdog (module docstring): `watch(when, conn)` before a request, `end(w)`
    after it; a request still running at `when` has its socket shut down."""

    def __init__(self):
        self._heap: list[tuple[float, int, _Watch]] = []
        self._wake = threading.Condition()
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, when: float, conn: http.client.HTTPConnection) -> _Watch:
        w = _Watch(when, conn)
        with self._wake:
            heapq.heappush(self._heap, (when, next(self._seq), w))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="mibench-http-deadlines")
                self._thread.start()
            self._wake.notify()
        return w

    def end(self, w: _Watch) -> bool:
        """Stop watching; whether the deadline had cut the request."""
        with self._wake:
            w.done = True
            return w.expired

    def _run(self) -> None:
        with self._wake:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._wake.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._wake.wait(wait)
                    continue
                w = heapq.heappop(self._heap)[2]
                w.expired = True
                sock = w.conn.sock
                if sock is not None:
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass


DEADLINES = Deadlines()


class HttpClient:
    """One keep-alive connection to a server. Not thread-safe: one per thread.

    `request` never raises for a failed request: a refused connection, a timeout
    (`timeout_s` for the whole request: module docstring) or a dropped connection is a
    Reply with that status, and the next request opens a fresh connection."""

    def __init__(self, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_response_bytes: int = MAX_RESPONSE_BYTES):
        self.base_url = base_url
        self.scheme, self.host, self.port, self.prefix = parse_base_url(base_url)
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._conn: http.client.HTTPConnection | None = None

    parse_url = staticmethod(parse_base_url)

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """One request, whole within `timeout_s`; a keep-alive connection the server
        closed meanwhile is retried once on a fresh one (scoring is idempotent)."""
        deadline = time.monotonic() + self.timeout_s
        for attempt in (0, 1):
            reused = self._conn is not None and self._conn.sock is not None
            conn = self._connection()
            left = deadline - time.monotonic()
            if left <= 0:
                return self._timed_out("the deadline passed before it was sent")
            watch = DEADLINES.watch(deadline, conn)
            try:
                reply = self._exchange(conn, method, path, body, left)
            except ConnectionRefusedError as e:
                DEADLINES.end(watch)
                self.close()
                return Reply(REFUSED, _reason(e).encode())
            except (OSError, http.client.HTTPException) as e:
                cut = DEADLINES.end(watch)
                self.close()
                if cut or isinstance(e, TimeoutError):
                    return self._timed_out(_reason(e))
                if reused and attempt == 0 and isinstance(
                        e, http.client.RemoteDisconnected | ConnectionResetError
                        | BrokenPipeError):
                    continue  # an idle keep-alive connection the server had closed
                return Reply(CONNECTION, _reason(e).encode())
            if DEADLINES.end(watch):  # cut, though what was read looked whole
                self.close()
                return self._timed_out("the answer was cut at the deadline")
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str,
                  body: bytes | None, left: float) -> Reply:
        """Send and read one request on `conn` (its socket timeout: what is left)."""
        conn.timeout = left
        if conn.sock is None:
            conn.connect()
        else:
            conn.sock.settimeout(left)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, self.prefix + path, body=body, headers=headers)
        resp = conn.getresponse()
        data = self._read(resp)
        if data is None:
            self.close()  # the rest of the answer is left unread
            return Reply(OVERSIZED, f"HTTP {resp.status}: the answer is longer than "
                         f"{self.max_response_bytes} bytes (Content-Length "
                         f"{resp.getheader('Content-Length', 'not given')}); not "
                         "read".encode())
        if resp.will_close:
            self.close()
        return Reply(resp.status, data)

    def _timed_out(self, why: str) -> Reply:
        return Reply(TIMEOUT, f"no whole answer within {self.timeout_s:g} s ({why})".encode())

    def _read(self, resp: http.client.HTTPResponse) -> bytes | None:
        """The answer's body, or None when it is longer than max_response_bytes: refused
        from its Content-Length before reading, else once reading passes the bound."""
        bound = self.max_response_bytes
        length = resp.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > bound:
            return None
        data = resp.read(bound + 1)  # the whole answer, unless it is longer than the bound
        return None if len(data) > bound else data

    def get_json(self, path: str):
        """`GET path` as JSON, or None when there is no 200 answer or it is not JSON."""
        reply = self.request("GET", path)
        if not reply.ok:
            return None
        try:
            return json.loads(reply.body)
        except ValueError:
            return None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__

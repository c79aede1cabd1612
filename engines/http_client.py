"""The HTTP transport of the `http` engine and the harness's load generator (stdlib
`http.client`, one keep-alive connection per client). What is sent and how an answer is
read is a wire's (engines/wires/); this module only moves bytes.

`HttpClient.request` never raises for a request that got no HTTP answer: the `Reply` then
carries a status of `refused`, `timeout` or `connection` and the reason, so a load
generator counts it as a failed request; an answer longer than `max_response_bytes`
(MAX_RESPONSE_BYTES) is `oversized`, refused from its Content-Length or as soon as reading
passes the bound, never read whole.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
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


class HttpClient:
    """One keep-alive connection to a server. Not thread-safe: one per thread.

    `request` never raises for a failed request: a refused connection, a timeout
    (`timeout_s` on connecting and on each read) or a dropped connection is a Reply with
    that status, and the next request opens a fresh connection."""

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
        """One request; a keep-alive connection the server closed meanwhile is retried
        once on a fresh one (scoring is idempotent)."""
        for attempt in (0, 1):
            reused = self._conn is not None and self._conn.sock is not None
            conn = self._connection()
            try:
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
            except ConnectionRefusedError as e:
                self.close()
                return Reply(REFUSED, _reason(e).encode())
            except TimeoutError as e:
                self.close()
                return Reply(TIMEOUT, f"no answer within {self.timeout_s:g} s ({_reason(e)})"
                             .encode())
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if reused and attempt == 0 and isinstance(
                        e, http.client.RemoteDisconnected | ConnectionResetError
                        | BrokenPipeError):
                    continue  # an idle keep-alive connection the server had closed
                return Reply(CONNECTION, _reason(e).encode())
        raise AssertionError("unreachable")  # pragma: no cover

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

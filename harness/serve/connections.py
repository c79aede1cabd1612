"""`mibench serve`'s HTTP connections (harness/serve/app.py): what uvicorn's options leave open.

uvicorn does the parts it has options for: `timeout_keep_alive` (idle connections between
requests), `timeout_graceful_shutdown` (requests in flight at a signal) and
`h11_max_incomplete_event_size` (header bytes, MAX_HEADER_BYTES). Its `limit_concurrency`
counts the connection asking too and answers 503 without closing anything, so it neither
caps sockets nor stops a slow client. `guarded_protocol` adds to uvicorn's h11 protocol:

- a deadline for each request's headers (`--header-timeout`), from the moment the
  connection is idle (opened, or its last answer sent): a slowloris client, or a socket
  that sends nothing, is answered 408 and closed;
- a cap on open connections (`--max-connections`): the one past it is answered 503 and
  closed at once;
- a lingering close: when the client may still be sending (a 413 or 408 before its body
  ended), the answer goes out, the write side is shut, and what the client still sends is
  discarded for up to LINGER_S or LINGER_BYTES before the socket closes, so that the client
  sees the answer rather than a reset.
"""

from __future__ import annotations

import json

MAX_HEADER_BYTES = 16 * 1024  # a request line and headers, at most (h11's default)
# a closed connection discards what its client still sends for this long, or this much
LINGER_S, LINGER_BYTES = 2.0, 4 * 1024**2


def raw_response(status: int, reason: str, message: str) -> bytes:
    """A whole HTTP/1.1 answer (SGLang's ErrorResponse) written straight to a socket,
    when no request was parsed."""
    body = json.dumps({"object": "error", "message": message, "type": reason.replace(" ", ""),
                       "param": None, "code": status}).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class _Lingering:
    """The connection's transport, whose `close` lingers when the client may still be
    sending (module docstring); `abort` closes at once."""

    def __init__(self, transport, protocol):
        self._t, self._p, self._closing = transport, protocol, False

    def __getattr__(self, name):
        return getattr(self._t, name)

    def is_closing(self) -> bool:
        return self._closing or self._t.is_closing()

    def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._t.is_closing() or not self._p.peer_still_sending() \
                or not self._t.can_write_eof():
            self._t.close()
            return
        self._p.lingering = True
        self._t.write_eof()
        self._t.resume_reading()
        self._p.loop.call_later(LINGER_S, self._t.close)

    def abort(self) -> None:
        self._closing = True
        self._t.close()


def guarded_protocol(limits):
    """uvicorn's h11 protocol with a headers deadline, a connection cap and a lingering
    close (module docstring), for `limits` (serve_limits.Limits)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        lingering = False
        _discarded = 0  # bytes dropped while lingering
        _deadline = None
        _cut_off = False  # past the cap or the headers deadline: the request is not read

        def connection_made(self, transport) -> None:
            super().connection_made(_Lingering(transport, self))
            if len(self.connections) > limits.max_connections:
                self._refuse(503, "Service Unavailable",
                             f"this server has {limits.max_connections} connections open, "
                             "its --max-connections; try again later", linger=False)
                return
            self._arm()

        def peer_still_sending(self) -> bool:
            return self._cut_off or self.conn.their_state is h11.SEND_BODY

        def _refuse(self, status: int, reason: str, message: str, linger=True) -> None:
            """Answer without reading the request, and close: lingering, or at once (past
            the cap, where lingering would keep the extra connection open)."""
            self._cut_off = True
            self.transport.write(raw_response(status, reason, message))
            if linger:
                self.transport.close()
            else:
                self.transport.abort()

        def _arm(self) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(limits.header_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _too_slow(self) -> None:
            self._deadline = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._refuse(408, "Request Timeout", "the request's headers did not arrive "
                             f"within this server's --header-timeout "
                             f"{limits.header_timeout:g} s")

        def data_received(self, data: bytes) -> None:
            if self.lingering or self._cut_off:  # the answer is out, the connection closing
                self._discarded += len(data)
                if self._discarded > LINGER_BYTES:
                    self.transport.abort()
                return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._disarm()  # the headers are in: the body has its own deadline

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._arm()  # the next request's headers

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def shutdown(self) -> None:
            if self.lingering or self._cut_off:
                self.transport.abort()
                return
            super().shutdown()

    return GuardedH11

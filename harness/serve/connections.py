"""`mibench serve`'s HTTP connections (harness/serve/app.py): what uvicorn's options leave open.

uvicorn does the parts it has options for: `timeout_keep_alive` (idle connections between
requests), `timeout_graceful_shutdown` (requests in flight at a signal) and
`h11_max_incomplete_event_size` (header bytes that arrive in pieces). Its
`limit_concurrency` counts the connection asking too and answers 503 without closing
anything, so it neither caps sockets nor stops a slow client; and its keep-alive timer is
cancelled by any byte and re-armed only after an answer. `guarded_protocol` adds to
uvicorn's h11 protocol one deadline for every state of a connection, whatever the app does
with the request's body:

- waiting for a request's headers (opened, or its last answer sent): `--header-timeout`
  from the moment it is idle, however the bytes trickle in; then 408 and closed;
- receiving a body (headers in): `--body-timeout` + BODY_GRACE_S from the headers, whether
  or not the app reads it (the app's own read answers 408 at `--body-timeout`); then 408
  and closed;
- an answer sent before its request's body ended (a 404, `GET /health` with a
  Content-Length): closed at once, lingering, never kept waiting for that body;
- the app working on a complete request: no client deadline (the scoring queue bounds it);
- an answer the client does not read: `--body-timeout` while the write side stays
  paused, then the socket is dropped;
- a request line and headers over MAX_HEADER_BYTES, in pieces (h11) or in one piece
  (counted here): 431 and closed.

Past `--max-connections` a new connection is taken on probation (at most
`--max-connections` of them at once): if its request line and headers arrive within
PROBATION_S (or `--header-timeout`, when shorter) it takes the slot of the connection that
has waited longest without a complete request (waiting for headers or receiving a body),
which is answered 503 and closed (an idle one is just closed); if they do not, or every
slot holds a complete request in progress, it is answered 503 with `Retry-After` and
closed. When probation is full too, the connection on probation that has waited longest
with nothing left unread (FIONREAD: silent, or a request line trickling in) is answered
503 and closed to make room; only when every one has bytes waiting to be parsed is the new
one refused. So clients holding every slot and every place on probation without
completing requests, even reconnecting as fast as they are closed (before, about 300 of
them against the default 128 locked every client out), cannot keep out a client that sends
its request line and headers at once: its bytes are waiting when it is accepted, so it is
never the one evicted.

Open files (harness/serve/open_files.py): the soft limit raised at start-up, a
`--max-connections` refused whose sockets the hard limit cannot hold, and a listening
socket that meets EMFILE without spinning.
A closing connection lingers: when the client may still be sending (a 413 or 408 before
its body ended), the answer goes out, the write side is shut, and what the client still
sends is discarded for up to LINGER_S or LINGER_BYTES before the socket closes, so that
the client sees the answer rather than a reset; lingering sockets do not count against the
cap, and at most `--max-connections` of them linger at once (the others close at once).
"""

from __future__ import annotations

import fcntl
import json
import struct
import termios
import time

MAX_HEADER_BYTES = 16 * 1024  # a request line and headers, at most (h11's default)
# a closed connection discards what its client still sends for this long, or this much
LINGER_S, LINGER_BYTES = 2.0, 4 * 1024**2
# after --body-timeout, the connection's own deadline: the app's read answers 408 first
BODY_GRACE_S = 1.0
RETRY_AFTER_S = 1  # what a 503 at the connection cap tells the client to wait
# past --max-connections, the time a new connection has to send its request line and
# headers to take a slot (or --header-timeout, when shorter)
PROBATION_S = 1.0


def raw_response(status: int, reason: str, message: str,
                 headers: dict[str, str] | None = None) -> bytes:
    """A whole HTTP/1.1 answer (SGLang's ErrorResponse) written straight to a socket,
    when no request was parsed."""
    body = json.dumps({"object": "error", "message": message, "type": reason.replace(" ", ""),
                       "param": None, "code": status}).encode()
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}connection: close\r\n\r\n").encode() \
        + body


def unread_bytes(transport) -> int:
    """Bytes that arrived on the connection's socket and are not read yet (FIONREAD); 0
    when the socket cannot say."""
    sock = transport.get_extra_info("socket")
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD,
                                              b"\0\0\0\0"))[0]
    except (OSError, AttributeError, ValueError, TypeError):
        return 0


def head_bytes(event) -> int:
    """The bytes of an h11 Request's request line and headers, as sent."""
    line = len(event.method) + len(event.target) + len(event.http_version) + 12
    return line + sum(len(k) + len(v) + 4 for k, v in event.headers.raw_items())


class _Lingering:
    """The connection's transport, whose `close` lingers when the client may still be
    sending (module docstring); `abort` closes without lingering, `drop` at once, even
    with unsent data."""

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
        lingering = sum(1 for c in self._p.connections if getattr(c, "lingering", False))
        if self._t.is_closing() or not self._p.peer_still_sending() \
                or not self._t.can_write_eof() or lingering >= self._p.cap:
            self._t.close()
            return
        self._p.lingering = True
        self._t.write_eof()
        self._t.resume_reading()
        self._p.loop.call_later(LINGER_S, self._t.close)

    def abort(self) -> None:
        self._closing = True
        self._t.close()

    def drop(self) -> None:
        self._closing = True
        self._t.abort()


def guarded_protocol(limits):
    """uvicorn's h11 protocol with a deadline in every state, eviction at the connection
    cap, a header size check and a lingering close (module docstring), for `limits`
    (serve_limits.Limits)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    holding = (h11.IDLE, h11.SEND_BODY)  # their states without a complete request

    class GuardedH11(H11Protocol):
        lingering = False
        probation = False  # past the cap, waiting for its headers to take a slot
        cap = limits.max_connections
        _discarded = 0  # bytes dropped while lingering
        _deadline = None  # the deadline of the connection's state
        _stalled = None  # the deadline of an answer the client does not read
        _cut_off = False  # answered without reading the request: what comes is dropped
        _since = 0.0  # when the connection began to wait for its current request
        _heard = 0  # bytes received since then

        def connection_made(self, transport) -> None:
            super().connection_made(_Lingering(transport, self))
            self._since = time.monotonic()
            parse = self.conn.next_event
            self.conn.next_event = lambda: self._checked(parse())
            if len(self._slotted()) <= limits.max_connections:
                self._arm(limits.header_timeout, self._too_slow)
                return
            waiting = [c for c in self.connections if c.probation and c.live()]
            if len(waiting) >= limits.max_connections and not self._evict_silent(waiting):
                self._full("its --max-connections and as many waiting for a slot, each with "
                           "its request line arriving")
                return
            self.probation = True  # a slot once its headers are in (module docstring)
            self._arm(min(PROBATION_S, limits.header_timeout), self._no_slot)

        def live(self) -> bool:
            return not (self.lingering or self._cut_off or self.transport.is_closing())

        def _slotted(self) -> list:
            return [c for c in self.connections if c.live() and not c.probation]

        def _full(self, why: str) -> None:
            self._refuse(503, "Service Unavailable",
                         f"this server has {limits.max_connections} connections open, {why}; "
                         "try again later", linger=False,
                         headers={"retry-after": str(RETRY_AFTER_S)})

        def _evict_silent(self, waiting: list) -> bool:
            """Room on probation for this connection: the one that has waited longest with
            nothing left unread (silent, or a request line trickling in) is answered 503
            and closed. False when every one has bytes waiting to be read (a request line
            about to be parsed, such as one sent whole with the connection)."""
            for c in sorted(waiting, key=lambda c: c._since):
                if unread_bytes(c.transport) == 0:
                    c._full("its --max-connections, and this one sent no request line and "
                            "headers before newer connections came")
                    return True
            return False

        def _no_slot(self) -> None:
            self._deadline = None
            if self.probation and self.live():
                self._full(f"its --max-connections, and this one sent no request line and "
                           f"headers within {min(PROBATION_S, limits.header_timeout):g} s")

        def _take_slot(self) -> bool:
            """A slot for this connection on probation, whose headers are in: a free one,
            or that of the connection which has waited longest without a complete request
            (answered 503 and closed; an idle one just closed)."""
            slotted = self._slotted()
            held = [c for c in slotted if c.conn.their_state in holding]
            if len(slotted) >= limits.max_connections and not held:
                return False
            if len(slotted) >= limits.max_connections:
                victim = min(held, key=lambda c: c._since)
                if victim.conn.their_state is h11.IDLE and victim._heard == 0:
                    victim.transport.abort()  # idle: nothing of a request to answer
                else:
                    victim._refuse(503, "Service Unavailable",
                                   "this connection held a slot without a complete request "
                                   "while the server was at its --max-connections "
                                   f"{limits.max_connections}; send the whole request at "
                                   "once", headers={"retry-after": str(RETRY_AFTER_S)})
            self.probation = False
            return True

        def _checked(self, event):
            """h11's next event, unless it is a request whose line and headers pass
            MAX_HEADER_BYTES (h11 checks only those that arrive in pieces), or one on
            probation that finds no slot."""
            if type(event) is not h11.Request:
                return event
            if head_bytes(event) > MAX_HEADER_BYTES:
                self._refuse(431, "Request Header Fields Too Large",
                             f"the request line and headers are {head_bytes(event)} bytes, "
                             f"more than this server's {MAX_HEADER_BYTES}")
                return h11.NEED_DATA
            if self.probation and not self._take_slot():
                self._full("each with a request in progress, its --max-connections")
                return h11.NEED_DATA
            return event

        def peer_still_sending(self) -> bool:
            return self._cut_off or self.conn.their_state is h11.SEND_BODY

        def _refuse(self, status: int, reason: str, message: str, linger=True,
                    headers: dict[str, str] | None = None) -> None:
            """Answer without reading the request, and close: lingering, or at once (past
            the cap, where lingering would keep the extra connection open)."""
            self._cut_off = True
            self._disarm()
            self.transport.write(raw_response(status, reason, message, headers))
            if linger:
                self.transport.close()
            else:
                self.transport.abort()

        def _arm(self, seconds: float, then) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, then)

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

        def _body_too_slow(self) -> None:
            self._deadline = None
            if self.transport.is_closing() or self.conn.their_state is not h11.SEND_BODY:
                return
            if self.cycle is not None and self.cycle.response_started:
                self.transport.abort()
                return
            self._refuse(408, "Request Timeout", "the request's body did not arrive within "
                         f"this server's --body-timeout {limits.body_timeout:g} s")

        def data_received(self, data: bytes) -> None:
            if self.lingering or self._cut_off:  # the answer is out, the connection closing
                self._discarded += len(data)
                if self._discarded > LINGER_BYTES:
                    self.transport.abort()
                return
            self._heard += len(data)
            before = self.conn.their_state
            super().data_received(data)
            self._follow(before)

        def _follow(self, before) -> None:
            """The deadline of the state the request is now in (module docstring)."""
            now = self.conn.their_state
            if self._cut_off or self.transport.is_closing() or now is before:
                return
            if now is h11.SEND_BODY:
                self._arm(limits.body_timeout + BODY_GRACE_S, self._body_too_slow)
            elif now is not h11.IDLE:
                self._disarm()  # a complete request: the app works on it

        def on_response_complete(self) -> None:
            unread = self.conn.their_state is h11.SEND_BODY  # answered before its body ended
            super().on_response_complete()  # may start a pipelined request
            if self.transport.is_closing():
                return
            if unread:
                self._cut_off = True
                self._disarm()
                self.transport.close()  # lingering: that body is never read
                return
            self._since, self._heard = time.monotonic(), 0
            if self.conn.their_state is h11.IDLE:
                self._arm(limits.header_timeout, self._too_slow)  # the next request's headers
            else:
                self._follow(h11.IDLE)

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stalled is None:
                self._stalled = self.loop.call_later(limits.body_timeout, self._not_read)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._stalled is not None:
                self._stalled.cancel()
                self._stalled = None

        def _not_read(self) -> None:
            self._stalled = None
            self.transport.drop()  # its answer cannot be delivered: nothing to linger for

        def connection_lost(self, exc) -> None:
            self._disarm()
            if self._stalled is not None:
                self._stalled.cancel()
            super().connection_lost(exc)

        def shutdown(self) -> None:
            if self.lingering or self._cut_off:
                self.transport.abort()
                return
            super().shutdown()

    return GuardedH11

"""`mibench serve` cannot be stalled by its clients: every connection has a deadline in
every state whatever the app does with the body, clients that hold connections without
completing a request cannot keep a well-formed one out (even by reconnecting), a flood of
big text bodies cannot delay a small request, and the documented limits hold as documented
(16 KiB of request line and headers in one piece, Retry-After at the connection cap).

Bounds are stated relative to latencies measured inside each test (a busy machine slows
both sides alike)."""

from __future__ import annotations

import json
import socket
import statistics
import threading
import time

import pytest

from mibench.engines import HttpClient, ScoreResult
from mibench.harness.serve import Served, Settings, build_app
from mibench.harness.serve.connections import (
    LINGER_S,
    MAX_HEADER_BYTES,
    PROBATION_S,
)
from mibench.harness.serve.limits import PIECE_CHARS, Limits, gib, pieces, tokenize
from mibench.harness.serve.request import BadRequest, ScoreCall

MiB = 1024**2
SMALL = {"query": [1, 2, 3], "items": [[4], [5]], "label_token_ids": [6]}


class Canned:
    """A fast engine: the same score for every item; `tokenizer`/`encode` when given."""

    model_config = None

    def __init__(self, encode=None):
        self.tokenizer = object() if encode else None
        self.encode = encode

    def score(self, query, items, label_token_ids, **kwargs):
        return ScoreResult(scores=[[0.5] * len(label_token_ids) for _ in items],
                           mode="single", num_items=len(items), num_tokens=1)


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def answer_of(s: socket.socket, timeout: float = 30) -> tuple[int | None, bytes]:
    """(status, whole answer) read to EOF; (None, b"") on a reset or nothing."""
    from test_serve_hostile import raw_answer

    data = raw_answer(s, timeout)
    return (int(data.split()[1]) if data.startswith(b"HTTP/") else None), data


def closed_within(s: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `s` (reading and dropping what it sends), None if
    it is still open after `seconds`."""
    t0 = time.monotonic()
    s.settimeout(0.2)
    while time.monotonic() - t0 < seconds:
        try:
            if not s.recv(65536):
                return time.monotonic() - t0
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - t0
    return None


def timed_post(url: str, body: dict, timeout: float = 120) -> tuple[int | str, float, bytes]:
    t0 = time.perf_counter()
    reply = HttpClient(url, timeout).request("POST", "/v1/score", json.dumps(body).encode())
    return reply.status, time.perf_counter() - t0, reply.body


def alone(url: str, n: int = 5) -> float:
    """The median latency of a small well-formed request on a quiet server."""
    return statistics.median(timed_post(url, SMALL)[1] for _ in range(n))


LIMITS = Limits(max_connections=6, header_timeout=2.0, body_timeout=2.0, keep_alive=1.0)


@pytest.fixture
def canned():
    app = build_app(Canned(), Settings(model="canned"), limits=LIMITS)
    with Served(app) as server:
        yield server


# --- a deadline in every state, whatever the app does with the body ----------------------

HOLDS = {  # the probes: an answer sent before its body, then one more byte
    "health with a body": b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
    "404 with a body": b"POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
    "405 with a body": b"PUT /v1/score HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n",
}


@pytest.mark.parametrize("probe", sorted(HOLDS))
def test_an_answer_before_its_body_closes_the_connection(canned, probe):
    """Before: the byte after the answer cancelled uvicorn's keep-alive timer and nothing
    re-armed it, so the socket held its slot for as long as the client liked."""
    s = connect(canned.url)
    s.sendall(HOLDS[probe])
    s.settimeout(10)
    assert s.recv(65536).startswith(b"HTTP/1.1 ")
    s.sendall(b"x")
    took = closed_within(s, LINGER_S + LIMITS.body_timeout + 5)
    assert took is not None and took < LINGER_S + 2, took
    s.close()


@pytest.mark.parametrize("sent,deadline", [
    (b"", "header_timeout"),  # silent
    (b"POST /v1/score HTTP/1.1\r\nHo", "header_timeout"),  # slowloris
    (b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: 100\r\n\r\n{", "body_timeout"),  # a body that stops
    (b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", "keep_alive"),  # idle after an answer
])
def test_every_state_ends_within_its_timeout(canned, sent, deadline):
    s = connect(canned.url)
    s.sendall(sent)
    bound = getattr(LIMITS, deadline)
    took = closed_within(s, bound + LINGER_S + 5)
    assert took is not None and took < bound + LINGER_S + 1.5, (deadline, took)
    s.close()


def test_an_answer_the_client_does_not_read_is_dropped():
    """The write side paused (the client reads nothing; the other deadlines far away):
    the socket is dropped after --body-timeout."""
    limits = Limits(header_timeout=60, keep_alive=60, body_timeout=2.0)
    with Served(build_app(Canned(), Settings(model="canned"), limits=limits)) as server:
        s = connect(server.url)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        s.settimeout(10)
        s.recv(65536)
        state = server.server.server_state
        (protocol,) = list(state.connections)
        t0 = time.monotonic()
        protocol.loop.call_soon_threadsafe(protocol.pause_writing)
        while state.connections and time.monotonic() - t0 < limits.body_timeout + 5:
            time.sleep(0.05)
        took = time.monotonic() - t0
        s.close()
    assert not state.connections and limits.body_timeout - 0.2 <= took, took


# --- holders cannot keep a well-formed client out ----------------------------------------

def holder(url: str, stop: threading.Event, opened: list, kind: int) -> None:
    """One hostile client, reconnecting as soon as the server closes it: the issue's
    answer-before-body trick, a slowloris, a silent socket, a body that never comes."""
    while not stop.is_set():
        try:
            s = connect(url)
        except OSError:
            time.sleep(0.05)
            continue
        opened.append(1)
        try:
            if kind == 0:
                s.sendall(HOLDS["health with a body"])
                s.settimeout(5)
                s.recv(65536)
                s.sendall(b"x")
            elif kind == 1:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHo")
            elif kind == 3:
                s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\nContent-Length: 99\r\n\r\n{")
            s.settimeout(0.5)
            while not stop.is_set():
                try:
                    if not s.recv(65536):
                        break
                except TimeoutError:
                    continue
        except OSError:
            pass
        finally:
            s.close()


def test_holders_cannot_keep_a_well_formed_client_out(canned):
    """As many hostile clients as the server has connections (6), each reconnecting as
    soon as it is closed: a client that sends its whole request at once is answered 200
    within 20 x its latency on a quiet server + 1 s, every time. Before, the
    answer-before-body sockets held every slot for good: every new client got 503."""
    quiet = alone(canned.url)
    stop, opened = threading.Event(), []
    threads = [threading.Thread(target=holder, args=(canned.url, stop, opened, k % 4),
                                daemon=True) for k in range(LIMITS.max_connections)]
    for t in threads:
        t.start()
    took = []
    try:
        time.sleep(LIMITS.header_timeout * 2)  # the holders have cycled through timeouts
        bound = 20 * quiet + 1.0
        for _ in range(5):
            status, seconds, body = timed_post(canned.url, SMALL)
            assert status == 200 and seconds < bound, (status, seconds, bound, body[:200])
            took.append(seconds)
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert len(opened) > LIMITS.max_connections  # they did reconnect
    print(f"served among holders within {max(took) * 1e3:.0f} ms (alone {quiet * 1e3:.1f} ms)")


def test_at_the_cap_a_client_without_headers_gets_503_with_retry_after(canned):
    """Six sockets hold every slot; a seventh that sends nothing is answered 503 with
    Retry-After after PROBATION_S; one that sends its request takes the oldest's slot."""
    held = [connect(canned.url) for _ in range(LIMITS.max_connections)]
    time.sleep(0.1)
    extra = connect(canned.url)
    t0 = time.monotonic()
    status, data = answer_of(extra, 10)
    assert status == 503 and b"retry-after: 1\r\n" in data.lower(), data
    assert b"--max-connections" in data and PROBATION_S - 0.1 < time.monotonic() - t0 < 5
    assert timed_post(canned.url, SMALL)[0] == 200
    assert closed_within(held[0], 5) is not None  # the oldest was evicted
    for s in held:
        s.close()


# --- the header limit holds in one piece ------------------------------------------------

@pytest.mark.parametrize("request_bytes", [
    b"GET /health?" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",  # a 20 KB line
    b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"X-A: " + b"b" * 20_000 + b"\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-%d: %s\r\n" % (i, b"c" * 90) for i in range(200)) + b"\r\n",  # many headers
])
def test_headers_over_16_kib_in_one_piece_are_431(canned, request_bytes):
    s = connect(canned.url)
    s.sendall(request_bytes)  # one piece
    status, data = answer_of(s, 10)
    assert status == 431 and str(MAX_HEADER_BYTES).encode() in data, data[:300]
    s.close()


def test_headers_within_16_kib_are_served(canned):
    s = connect(canned.url)
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-A: " +
              b"b" * (MAX_HEADER_BYTES - 200) + b"\r\n\r\n")
    assert answer_of(s, 10)[0] == 200
    s.close()


def test_sizes_are_shown_in_a_unit_that_says_them():
    assert "--max-body 4.0 KiB" in Limits(max_body=4096).resolved().summary()
    assert gib(8 * MiB) == "8.0 MiB" and gib(512) == "512 bytes" and gib(3 * 1024**3) == \
        "3.00 GiB"


# --- big text bodies: refused after bounded work, never in a small request's way ---------

def test_a_long_text_is_refused_after_about_the_budget_of_tokenizing():
    """A counting byte-level encoder: an 8 MiB text against a budget of 1,000 tokens is
    refused having encoded at most the budget + one piece (plus one char a seam), not
    8 MiB; a text within the budget is encoded whole, as the engine would."""
    seen = []

    def encode(text):
        seen.append(len(text))
        return list(text.encode())

    text = "word " * (8 * MiB // 5)
    call = ScoreCall(query=text, items=["x"], labels=[1], apply_softmax=False,
                     item_first=False, model=None, overrides={})
    with pytest.raises(BadRequest) as e:
        tokenize(call, encode, budget=1000)
    assert e.value.status == 413 and e.value.field == "query"
    assert "--max-tokens" in str(e.value)
    assert sum(seen) <= 1000 + PIECE_CHARS + len(seen)
    seen.clear()
    short = "word " * 3000  # 15,000 characters: one piece
    call = ScoreCall(query=short, items=["ab", "c"], labels=[1], apply_softmax=False,
                     item_first=False, model=None, overrides={})
    assert tokenize(call, encode, budget=20_000).query == list(short.encode())
    assert "".join(pieces(text)) == text and max(map(len, pieces(text))) <= PIECE_CHARS


def test_many_short_texts_past_the_budget_stop_early():
    seen = []

    def encode(text):
        seen.append(len(text))
        return list(text.encode())

    call = ScoreCall(query="q", items=["i" * 10_000] * 500, labels=[1], apply_softmax=False,
                     item_first=False, model=None, overrides={})
    with pytest.raises(BadRequest):
        tokenize(call, encode, budget=50_000)
    assert sum(seen) <= 70_000


@pytest.mark.slow
def test_a_big_body_flood_does_not_delay_a_small_request(jax_tiny):
    """Four 7.6 MiB text bodies, then a small request: the small one is answered within
    its quiet latency + one big body's own time to its 413 (it waits behind none of them),
    and every big one gets its 413 within a few of those times (their tokenizing is
    bounded by --max-tokens, not their size). Before: ~10 s each, the small one 39 s."""
    jax_tiny.encode("warm")  # the tokenizer loads on its first use (seconds)
    app = build_app(Canned(jax_tiny.encode), Settings(model="canned"), limits=Limits())
    big = json.dumps({"query": "a " * int(3.8 * MiB), "items": ["b"],
                      "label_token_ids": [6]}).encode()
    assert 7.5 * MiB < len(big) < 8 * MiB
    with Served(app) as server:
        quiet = alone(server.url)
        t0 = time.perf_counter()
        reply = HttpClient(server.url, 120).request("POST", "/v1/score", big)
        one_big = time.perf_counter() - t0
        assert reply.status == 413 and b"--max-tokens" in reply.body, reply.body[:300]
        bigs: list = []

        def send_big():
            t = time.perf_counter()
            r = HttpClient(server.url, 300).request("POST", "/v1/score", big)
            bigs.append((r.status, time.perf_counter() - t))

        senders = [threading.Thread(target=send_big) for _ in range(4)]
        for s in senders:
            s.start()
        time.sleep(min(0.5, one_big / 2))  # the big bodies are in, being parsed
        status, small, _ = timed_post(server.url, SMALL)
        for s in senders:
            s.join(300)
    assert status == 200 and small < quiet + one_big, (small, quiet, one_big)
    assert [b[0] for b in bigs] == [413] * 4
    assert max(b[1] for b in bigs) < 6 * one_big + 1, (bigs, one_big)
    print(f"small request under a flood of 4 x 7.6 MiB text bodies: {small * 1e3:.0f} ms "
          f"(alone {quiet * 1e3:.0f} ms; one big body's 413: {one_big:.2f} s; the four: "
          f"{', '.join(f'{b[1]:.2f}' for b in bigs)} s)")

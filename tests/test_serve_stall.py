"""`mibench serve` cannot be stalled by its clients: every connection has a deadline in
every state whatever the app does with the body, clients that hold connections without
completing a request cannot keep a well-formed one out (even by reconnecting), a flood of
big text bodies cannot delay a small request, and the documented limits hold as documented
(16 KiB of request line and headers in one piece, Retry-After at the connection cap).

Bounds are stated relative to latencies measured inside each test (a busy machine slows
both sides alike)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import threading
import time

import pytest
from conftest import python_start_s

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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_at_the_cap_a_client_without_headers_gets_503_with_retry_after(canned):
    """Six sockets hold every slot; a seventh that sends nothing is answered 503 with
    Retry-After after PROBATION_S; one that sends its request takes the oldest's slot."""
    held = [connect(canned.url) for _ in range(LIMITS.max_connections)]
    time.sleep(0.1)
    extra = connect(canned.url)
    t0 = time.monotonic()
    status, data = answer_of(extra, 10)
    assert status == 503 and b"retry-after: 1\r\n" in data.lower(), data
    took = time.monotonic() - t0
    assert b"--max-connections" in data and PROBATION_S - 0.1 < took < 5 + \
        50 * python_start_s(), took
    assert timed_post(canned.url, SMALL)[0] == 200
    assert closed_within(held[0], 5) is not None  # the oldest was evicted
    for s in held:
        s.close()


# --- the header limit holds in one piece ------------------------------------------------

@pytest.mark.slow
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


@pytest.mark.slow
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


# --- shutdown: a request left unfinished is told why ----------------------------------------

class Stuck(Canned):
    """An engine whose `score` waits until it is let go."""

    def __init__(self):
        super().__init__()
        self.scoring, self.let_go = threading.Event(), threading.Event()

    def score(self, query, items, label_token_ids, **kwargs):
        self.scoring.set()
        self.let_go.wait(60)
        return super().score(query, items, label_token_ids, **kwargs)


@pytest.mark.slow
def test_a_request_unfinished_at_the_shutdown_timeout_gets_a_503_naming_it():
    """Issue 45: a request still scoring when --shutdown-timeout ended got uvicorn's 500
    ("Internal Server Error"); it is a 503 saying the server is shutting down."""
    engine = Stuck()
    limits = Limits(shutdown_timeout=1.0)
    replies = []
    with Served(build_app(engine, Settings(model="canned"), limits=limits)) as server:
        sender = threading.Thread(target=lambda: replies.append(timed_post(server.url, SMALL)),
                                  daemon=True)
        sender.start()
        assert engine.scoring.wait(30)
    try:
        sender.join(30)
    finally:
        engine.let_go.set()
    (status, _, body), = replies
    assert status == 503, (status, body[:300])
    reply = json.loads(body)
    assert "shutting down" in reply["message"] and "--shutdown-timeout of 1 s" in \
        reply["message"], reply


# --- a crowd of silent sockets reconnecting as fast as they are closed ---------------------

SERVER = """
import os, resource, sys
sys.path.insert(0, {tests!r})
from test_serve_stall import Canned
from mibench.harness.serve import Served, Settings, build_app
from mibench.harness.serve.limits import Limits

app = build_app(Canned(), Settings(model="canned"), limits=Limits({limits}))
with Served(app, **({{}} if {loop!r} == "auto" else {{"loop": {loop!r}}})) as server:
    {before_url}
    print(server.url, flush=True)
    sys.stdin.read()  # until the test closes it
"""


@contextlib.contextmanager
def served_apart(limits: str, loop: str = "auto", before_url: str = "pass"):
    """A Canned server in a process of its own (so that the test's own threads do not
    slow it): its url and process."""
    import subprocess
    import sys
    from pathlib import Path

    script = SERVER.format(tests=str(Path(__file__).parent), limits=limits, loop=loop,
                           before_url=before_url)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), proc.stderr.read()
        yield url, proc
    finally:
        proc.stdin.close()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_crowd_of_silent_reconnecting_sockets_cannot_lock_a_client_out():
    """Issue 45: past --max-connections and as many on probation, silent sockets reopened
    as fast as the server closed them answered every well-formed client 503 (about 300
    against the default 128: 0 of 15 answered). Here 20 against 4 slots, the server, the
    crowd and the client each a process (as `mibench job serve-flood` runs 300 and 1,000
    against the defaults): every request is answered 200 within 20 x its latency alone
    + 2 s."""
    from mibench.harness.under_test.jobs.serve_flood import one_crowd, request

    with served_apart("max_connections=4, header_timeout=10.0") as (url, _):
        host, port = url.removeprefix("http://").split(":")
        quiet = statistics.median(request(host, int(port), 30)[1] for _ in range(5))
        bound = 20 * quiet + 2.0
        got = one_crowd(host, int(port), 20, requests=5, interval=0.3, timeout=30)
    assert got["answered"] == 5 and got["max_ms"] < 1e3 * bound, (got, bound)
    assert got["crowd"]["opened"] > 20  # the crowd reconnected
    print(f"served among 20 silent sockets within {got['max_ms']:.0f} ms (alone "
          f"{quiet * 1e3:.1f} ms)")


def cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.slow
@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_accepting_at_the_open_files_limit_neither_spins_nor_crashes(loop):
    """A server with 6 files to spare and 16 slots, under 100 silent sockets reconnecting
    for 2.5 s: accepting meets EMFILE again and again. It neither dies nor spins (once the
    crowd stops, it takes less than a tenth of a CPU over 1 s) and then answers a request.
    Each loop uvicorn may run on: the listening socket (and libuv, for uvloop) closes what
    waits at the limit on a reserved descriptor. Before, asyncio's loop logged EMFILE over 100,000
    times in 5 s, stayed at a full CPU and accepted nothing more."""
    import multiprocessing

    from mibench.harness.under_test.jobs.serve_flood import crowd

    pytest.importorskip(loop)
    spare = ("soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE); resource.setrlimit("
             "resource.RLIMIT_NOFILE, (len(os.listdir('/proc/self/fd')) + 6, hard))")
    with served_apart("max_connections=16", loop, spare) as (url, proc):
        host, port = url.removeprefix("http://").split(":")
        spawn = multiprocessing.get_context("spawn")
        counts = spawn.Queue()
        flood = spawn.Process(target=crowd, args=(host, int(port), 100, 2.5, counts),
                              daemon=True)
        flood.start()
        assert counts.get(timeout=60)["opened"] > 100  # the crowd reconnected
        flood.join(10)
        time.sleep(1.5)  # a paused accept resumes within 1 s
        before = cpu_s(proc.pid)
        time.sleep(1.0)
        idle = cpu_s(proc.pid) - before  # CPU seconds in 1 s
        assert proc.poll() is None, proc.stderr.read()
        assert idle < 0.1, f"the server took {idle:.0%} of a CPU with nothing to do"
        status, _, body = timed_post(url, SMALL, timeout=30)
        assert status == 200, (status, body[:300])
    log = proc.stderr.read()
    assert "Too many open files" not in log, log[-2000:]  # nothing logged, nothing raised


def test_the_open_files_limit_is_raised_and_a_hard_limit_too_low_is_refused():
    """At start-up the soft limit goes to the hard one; a hard limit below what the
    connections need (3 x --max-connections + FILES_RESERVE) is one line, exit 2, naming
    --max-connections, before any weights load."""
    import resource
    import subprocess
    import sys

    from mibench.harness.serve.open_files import FILES_RESERVE, open_files

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = max(len(os.listdir("/proc/self/fd")) + 16, 64)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (low, hard))
        now, need = open_files(8)
        assert now == (hard if hard != resource.RLIM_INFINITY else now) and now >= need
        assert need == 3 * 8 + FILES_RESERVE
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    out = subprocess.run(["sh", "-c", 'ulimit -n 200 && exec "$@"', "sh", sys.executable,
                          "-m", "mibench.harness.cli", "serve", "--model", "embedded:tiny",
                          "--port", "0", "--max-connections", "64"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    line, = out.stderr.strip().splitlines()
    assert line.startswith("error: --max-connections: 64 connections need up to 256 open "
                           "files") and "hard limit of 200" in line, line

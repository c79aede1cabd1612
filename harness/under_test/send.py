"""Sending an http case's requests (harness/under_test/requests_case.py): the case's bodies as they
are built and what came back for each (`Load`), the closed loop (`clients` threads) and the
open loop (Poisson arrivals at `rate`), and the warmup requests. Each request records when
it was sent, its latency (sending to the whole answer), its status, its item count, its lag
behind its arrival (open loop) and, when it failed, the answer or the reason (truncated).
"""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time
from collections.abc import Callable

import numpy as np

from mibench.engines import HttpClient, MibenchError

from ..config.cases import HttpPlan
from ..records import HttpRequest
from .client_sizes import MAX_IN_FLIGHT
from .feed import Bodies, Built, Feed

ERROR_CHARS = 500
INVALID = "invalid"  # a 200 whose scores are not the request's (wire.decode)


class Sender:
    """Sends a case's requests: their bodies as they are built (`feed`) and what came back
    for each (the requests side of a "load"; host/load.py is the machine's); `tokens`
    keeps each sent request's token count (for tokens/s)."""

    def __init__(self, plan: HttpPlan, bodies: Bodies, base_url: str, first: int = 0,
                 count: int | None = None):
        self.plan, self.bodies, self.base_url = plan, bodies, base_url
        count = plan.warmup_requests + plan.requests if count is None else count
        self.first = first  # request indices first .. first + count - 1
        self.feed = Feed(bodies, first, count)
        self.tokens = [0] * count
        self.first_scores: list[list[float]] | None = None
        self.stop = threading.Event()
        self.in_flight: dict[int, float] = {}  # request index -> when it was sent
        self._clients: list[HttpClient] = []
        self._lock = threading.Lock()

    def client(self) -> HttpClient:
        c = HttpClient(self.base_url, self.plan.timeout_s)
        with self._lock:
            self._clients.append(c)
        return c

    def close(self) -> None:
        self.feed.close()
        with self._lock:
            for c in self._clients:
                c.close()

    def send(self, client: HttpClient, built: Built, start: float,
             scheduled: float | None = None) -> HttpRequest:
        """Send a built request; its record (times relative to `start`)."""
        b, i = self.bodies, built.index
        self.tokens[i - self.first] = built.tokens
        t0 = self.in_flight[i] = time.perf_counter()
        try:
            reply = b.wire.send(client, built.body)
        finally:
            t1 = time.perf_counter()
            del self.in_flight[i]
        status, error = reply.status, None
        if reply.ok:
            try:
                scores = b.wire.decode(reply, built.items, b.labels, b.softmax, b.dtype)
                if i == 0:
                    self.first_scores = scores
            except ValueError as e:  # names the item
                status, error = INVALID, f"request {i}: {e}"
        else:
            error = reply.text(ERROR_CHARS)
        return HttpRequest(sent_s=t0 - start, latency_s=t1 - t0, status=status,
                           items=built.items,
                           lag_s=None if scheduled is None else max(0.0, t0 - scheduled),
                           error=error[:ERROR_CHARS + 3] if error else None)


def closed_loop(sender: Sender, first: int, n: int, clients: int,
                out: list[HttpRequest | None]) -> None:
    """`clients` threads, each sending the next request when its last one is answered."""
    failures = []

    def worker(start: float) -> None:
        c = sender.client()
        try:
            while not sender.stop.is_set() and (built := sender.feed.take()) is not None:
                out[built.index - first] = sender.send(c, built, start)
        except BaseException as e:  # a bug here, not a failed request: re-raised below
            failures.append(e)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(start,), daemon=True,
                                name=f"mibench-http-{k}") for k in range(min(clients, n))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sender.stop.set()
    if failures:
        raise failures[0]


def arrivals(n: int, rate: float, seed: int) -> np.ndarray:
    """Poisson arrival times (seconds from the first, which is at 0)."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def open_loop(sender: Sender, first: int, n: int, rate: float, seed: int,
              out: list[HttpRequest | None],
              enough: Callable[[HttpRequest | None, int], bool] | None = None,
              overdue_s: float = math.inf) -> None:
    """Requests sent at Poisson arrivals of `rate` per second, whatever is in flight (at
    most MAX_IN_FLIGHT: a later arrival waits for one to end, and records its lag). When
    `enough(record, overdue)` says so, no more are sent (those in flight end): after each
    answer (`record`), and at each arrival (`record` None), with `overdue` the requests in
    flight for longer than `overdue_s` (a server that fell behind answers late, or never,
    so a step need not wait for its answers to know)."""
    local, failures = threading.local(), []
    slots = threading.BoundedSemaphore(min(n, MAX_IN_FLIGHT))
    lock = threading.Lock()

    def overdue() -> int:
        now = time.perf_counter()  # a copy: tasks add and remove theirs meanwhile
        return sum(1 for t in tuple(sender.in_flight.values()) if now - t > overdue_s)

    def task(built: Built, start: float, scheduled: float) -> None:
        try:
            if getattr(local, "client", None) is None:
                local.client = sender.client()
            record = sender.send(local.client, built, start, scheduled)
            out[built.index - first] = record
            if enough is not None:
                with lock:
                    if enough(record, overdue()):
                        sender.stop.set()
        except BaseException as e:  # a bug here, not a failed request: re-raised below
            failures.append(e)
        finally:
            slots.release()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(n, MAX_IN_FLIGHT),
                                                 thread_name_prefix="mibench-http")
    times = arrivals(n, rate, seed)
    try:
        start = time.perf_counter()
        for k in range(n):
            when = start + float(times[k])
            delay = when - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            slots.acquire()
            if enough is not None and overdue_s < math.inf:
                with lock:
                    if enough(None, overdue()):
                        sender.stop.set()
            built = None if sender.stop.is_set() else sender.feed.take()
            if built is None or failures:
                slots.release()
                break
            pool.submit(task, built, start, when)
        pool.shutdown(wait=True)
    finally:
        sender.stop.set()
        pool.shutdown(wait=False, cancel_futures=True)
    if failures:
        raise failures[0]


def warm_up(sender: Sender, count: int, warm: list[HttpRequest],
            tick: Callable[[str], None]) -> None:
    """`count` warmup requests one at a time; all of them failing is the case's error."""
    client = sender.client()
    start = time.perf_counter()
    for _ in range(count):
        warm.append(sender.send(client, sender.feed.take(), start))
    tick("warmup")
    if warm and all(r.status != 200 for r in warm):
        raise MibenchError(f"all {len(warm)} warmup request(s) failed (first: "
                           f"{warm[0].status}: {warm[0].error}); the load was not "
                           "sent", field="base_url")

"""Measuring an `engine: http` case: a load of SGLang `POST /v1/score` requests against a
server, recorded request by request (`CaseRecord.http`, harness.records.HttpMetrics).

Every request body is prepared before anything is sent: request i scores the workload
drawn with seed `workload.seed + i` (a JSONL workload: its request i, cycling), so each
request has its own query and a server's prefix cache only helps where it should;
`same_query: true` repeats the workload's first request, to measure that cache on purpose.
`warmup_requests` go first, one at a time and untimed (request 0 is the workload itself:
its scores are the case's `scores`); then the measured `requests`:

- closed loop (`clients: N`): N threads, each with its own keep-alive connection, send the
  next request as soon as their last one is answered;
- open loop (`rate: R`): requests arrive as a Poisson process of R per second (exponential
  gaps, seeded by the workload's seed), each sent on arrival by a pool of up to
  MAX_IN_FLIGHT threads. A request sent after its arrival (every thread busy) records the
  delay as `lag_s`: the client could not offer the rate.

Each request records when it was sent, its latency (sending to the whole answer), its
status, its item count and, when it failed, the answer or the reason (truncated). A
refused connection, a timeout (`timeout_s`), a dropped connection, a 5xx or any other
non-200 status, and a 200 whose body is not the request's scores (`invalid`) are errors.
When more than `max_error_rate` of the measured requests fail the case is `failed`, with
the first error and the counts by status in its error message; everything measured is kept.
Scores are checked where they enter (the wire's `decode`: the request's shape, finite
probabilities, rows that sum as the softmax setting says within the dtype's tolerance): one
`invalid` answer, warmup or measured, fails the case whatever `max_error_rate` says, naming
the request and the item.
When every warmup request fails the load is not sent (a dead server costs one timeout, not
`requests` of them).

The case's usual metrics describe the load as one run: `timed_s` is its duration (first
send to last answer), items/s and tokens/s count answered requests. No FLOPs or MFU: the
work happens on a machine the harness does not see.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import itertools
import threading
import time
import traceback
from collections.abc import Callable

import numpy as np

from mibench.engines import HttpClient, MibenchError, fact_problem
from mibench.harness.config.cases import CaseSpec, HttpPlan
from mibench.harness.records import (
    CaseRecord,
    ErrorInfo,
    HttpMetrics,
    HttpRequest,
    Metrics,
)
from mibench.harness.run.measure import deadline
from mibench.harness.stats.describe import latency_of, summarize
from mibench.harness.stats.metrics import score_digest
from mibench.workloads import Request, generate, materialize, total_tokens

ERROR_CHARS = 500
INVALID = "invalid"  # a 200 whose scores are not the request's (wire.decode)
MAX_IN_FLIGHT = 256  # open loop: requests in flight at most; later arrivals wait (lag_s)


@dataclasses.dataclass
class Prepared:
    """Request i's body, item count and tokens, made before the load starts."""

    bodies: list[bytes]
    items: list[int]
    tokens: list[int]
    labels: int
    softmax: bool = False  # what the answers' scores are checked against (wire.decode)
    dtype: str = "float32"
    wire: object = None  # the engine's wire (engines/wires): how requests are put and read


def workload_requests(case: CaseSpec, engine, n: int) -> list[Request]:
    """The workload of each of `n` requests (module docstring)."""
    spec, plan, cfg = case.workload, case.http, engine.model_config
    if cfg is None:
        raise MibenchError(f"the vocabulary of {case.model} is unknown here, so no workload "
                           "can be generated for it: name a preset or a checkpoint folder",
                           field="model.path")
    vocab, exclude = cfg.vocab_size, engine.special_ids
    if spec.requests is not None:
        reqs = materialize(spec, vocab, exclude=exclude, tokenize=engine.encode)
        return [reqs[0 if plan.same_query else i % len(reqs)] for i in range(n)]
    if plan.same_query:
        return [generate(spec, vocab, exclude)] * n
    return [generate(spec.replace(seed=spec.seed + i), vocab, exclude) for i in range(n)]


def prepare(case: CaseSpec, engine) -> Prepared:
    plan, w = case.http, case.workload
    reqs = workload_requests(case, engine, plan.warmup_requests + plan.requests)
    bodies: dict[int, bytes] = {}  # one body per distinct request (same_query: one)
    for r in reqs:
        if id(r) not in bodies:
            bodies[id(r)] = engine.wire.encode(list(r.query), [list(i) for i in r.items],
                                               list(w.label_token_ids), w.apply_softmax,
                                               plan.served_model)
    return Prepared(bodies=[bodies[id(r)] for r in reqs], items=[len(r.items) for r in reqs],
                    tokens=[total_tokens([r], w.delimiter) for r in reqs],
                    labels=len(w.label_token_ids), softmax=w.apply_softmax, dtype=case.dtype,
                    wire=engine.wire)


def server_mismatch(facts: dict, case: CaseSpec) -> MibenchError | None:
    """What a server that reports its settings (mibench serve) would score differently
    from what the case says: delimiter, semantics, dtype; a fact of another JSON type than
    the case's (a delimiter reported as the string "151643") is named as such, never as
    "151643 vs 151643"."""
    w, url = case.workload, case.http.base_url or "the launched server"
    problem = fact_problem(facts, "delimiter", w.delimiter)
    if problem:
        return MibenchError(f"the server at {url} {problem}; the workload's delimiter is "
                            f"{w.delimiter}", field="workload.delimiter")
    semantics = getattr(w, "semantics", None) or ("plain" if w.delimiter is None
                                                  else "delimited")
    problem = facts.get("semantics") is not None and fact_problem(
        facts, "semantics", semantics)
    if problem:
        return MibenchError(f"the server at {url} {problem}; the workload scores "
                            f"{semantics}", field="workload.semantics")
    problem = facts.get("dtype") is not None and fact_problem(
        facts, "dtype", case.dtype)
    if problem:
        return MibenchError(f"the server at {url} {problem}, the case says {case.dtype}: "
                            "set model.dtype to the server's (parity tolerances follow it)",
                            field="model.dtype")
    return None


class Load:
    """The prepared requests and what came back for each."""

    def __init__(self, plan: HttpPlan, prepared: Prepared, base_url: str):
        self.plan, self.p, self.base_url = plan, prepared, base_url
        self.first_scores: list[list[float]] | None = None
        self.stop = threading.Event()
        self._clients: list[HttpClient] = []
        self._lock = threading.Lock()

    def client(self) -> HttpClient:
        c = HttpClient(self.base_url, self.plan.timeout_s)
        with self._lock:
            self._clients.append(c)
        return c

    def close(self) -> None:
        with self._lock:
            for c in self._clients:
                c.close()

    def send(self, client: HttpClient, i: int, start: float,
             scheduled: float | None = None) -> HttpRequest:
        """Send request i; its record (times relative to `start`)."""
        t0 = time.perf_counter()
        reply = self.p.wire.send(client, self.p.bodies[i])
        t1 = time.perf_counter()
        status, error = reply.status, None
        if reply.ok:
            try:
                scores = self.p.wire.decode(reply, self.p.items[i], self.p.labels,
                                            self.p.softmax, self.p.dtype)
                if i == 0:
                    self.first_scores = scores
            except ValueError as e:  # names the item
                status, error = INVALID, f"request {i}: {e}"
        else:
            error = reply.text(ERROR_CHARS)
        return HttpRequest(sent_s=t0 - start, latency_s=t1 - t0, status=status,
                           items=self.p.items[i],
                           lag_s=None if scheduled is None else max(0.0, t0 - scheduled),
                           error=error[:ERROR_CHARS + 3] if error else None)


def closed_loop(load: Load, first: int, n: int, clients: int,
                out: list[HttpRequest | None]) -> None:
    """`clients` threads, each sending the next request when its last one is answered."""
    counter, failures = itertools.count(first), []

    def worker(start: float) -> None:
        c = load.client()
        try:
            while not load.stop.is_set():
                i = next(counter)
                if i >= first + n:
                    return
                out[i - first] = load.send(c, i, start)
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
        load.stop.set()
    if failures:
        raise failures[0]


def arrivals(n: int, rate: float, seed: int) -> np.ndarray:
    """Poisson arrival times (seconds from the first, which is at 0)."""
    gaps = np.random.default_rng(seed).exponential(1.0 / rate, max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def open_loop(load: Load, first: int, n: int, rate: float, seed: int,
              out: list[HttpRequest | None]) -> None:
    """Requests sent at Poisson arrivals of `rate` per second, whatever is in flight."""
    local = threading.local()

    def task(i: int, start: float, scheduled: float) -> None:
        if getattr(local, "client", None) is None:
            local.client = load.client()
        out[i - first] = load.send(local.client, i, start, scheduled)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=min(n, MAX_IN_FLIGHT),
                                                 thread_name_prefix="mibench-http")
    times = arrivals(n, rate, seed)
    futures = []
    try:
        start = time.perf_counter()
        for k in range(n):
            when = start + float(times[k])
            delay = when - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(pool.submit(task, first + k, start, when))
        for f in futures:
            f.result()
    finally:
        load.stop.set()
        pool.shutdown(wait=False, cancel_futures=True)


def http_metrics(plan: HttpPlan, measured: list[HttpRequest],
                 warmup: list[HttpRequest]) -> HttpMetrics:
    """Counts, rates and latency percentiles of the measured requests."""
    ok = [r for r in measured if r.status == 200]
    failed = [r for r in measured if r.status != 200]
    duration = (max(r.sent_s + r.latency_s for r in measured)
                - min(r.sent_s for r in measured)) if measured else None
    per_s = duration is not None and duration > 0
    latency = latency_of([1000.0 * r.latency_s for r in ok])
    first_error = f"{failed[0].status}: {failed[0].error}" if failed else None
    return HttpMetrics(
        load="closed" if plan.clients is not None else "open", sent=len(measured), ok=len(ok),
        duration_s=duration, requests_per_s=len(ok) / duration if per_s else None,
        items_per_s=sum(r.items for r in ok) / duration if per_s else None, latency=latency,
        errors=dict(collections.Counter(str(r.status) for r in failed)),
        error_rate=len(failed) / len(measured) if measured else 0.0, first_error=first_error,
        warmup_errors=dict(collections.Counter(str(r.status) for r in warmup
                                               if r.status != 200)),
        requests=measured)


def case_numbers(rec: CaseRecord, m: HttpMetrics, tokens_ok: int) -> None:
    """The case's usual fields from the load: one run of `duration_s`."""
    if m.duration_s is not None and m.duration_s > 0:
        rec.timed_s = [m.duration_s]
        rec.metrics.total_s = summarize([m.duration_s])
        if m.items_per_s:
            rec.metrics.throughput_items_per_s = summarize([m.items_per_s])
            rec.metrics.latency_per_item_ms = summarize([1000.0 / m.items_per_s])
            rec.metrics.tokens_per_s = tokens_ok / m.duration_s


def measure_http(case: CaseSpec, pool, rec: CaseRecord, tick: Callable[[str], None],
                 measuring: Callable[[], None] = lambda: None) -> CaseRecord:
    """Measure an http case (module docstring) into `rec`; any exception fails the case
    with what was measured before it."""
    plan = case.http
    rec.params = plan.as_dict()
    rec.metrics = Metrics()
    warm: list[HttpRequest] = []
    measured: list[HttpRequest | None] = [None] * plan.requests
    load = None
    try:
        engine = pool.get(case.engine_key)
        rec.topology = rec.topology.with_engine(engine.topology)
        rec.resolved = engine.resolved_options(case.mode, {})
        problem = server_mismatch(rec.resolved.get("server") or {}, case)
        if problem is not None:
            raise problem
        prepared = prepare(case, engine)
        load = Load(plan, prepared, engine.base_url)
        measuring()
        with deadline(case.runs.timeout_s):
            client = load.client()
            start = time.perf_counter()
            for i in range(plan.warmup_requests):
                warm.append(load.send(client, i, start))
            rec.warmup_s = [r.latency_s for r in warm]
            tick("warmup")
            if warm and all(r.status != 200 for r in warm):
                raise MibenchError(f"all {len(warm)} warmup request(s) failed (first: "
                                   f"{warm[0].status}: {warm[0].error}); the load was not "
                                   "sent", field="base_url")
            first, n = plan.warmup_requests, plan.requests
            if plan.clients is not None:
                closed_loop(load, first, n, plan.clients, measured)
            else:
                open_loop(load, first, n, plan.rate, case.workload.seed, measured)
            tick("load")
    except Exception as e:
        rec.status = "failed"
        rec.error = ErrorInfo(type=type(e).__name__, message=str(e),
                              traceback=traceback.format_exc())
    finally:
        if load is not None:
            load.close()
    done = [(r, i) for i, r in enumerate(measured) if r is not None]
    offset = plan.warmup_requests
    tokens = [load.p.tokens[offset + i] for _, i in done] if load is not None else []
    m = http_metrics(plan, [r for r, _ in done], warm)
    rec.http = m
    first = (warm or [r for r, _ in done] or [None])[0]
    rec.compile_s = first.latency_s if first is not None and first.status == 200 else None
    if load is not None and load.first_scores is not None:
        rec.scores = [load.first_scores]
        rec.metrics.score_digest = score_digest(rec.scores)
    case_numbers(rec, m, sum(t for (r, _), t in zip(done, tokens, strict=True)
                             if r.status == 200))
    invalid = next((r for r in [*warm, *(r for r, _ in done)] if r.status == INVALID), None)
    if rec.status == "ok" and invalid is not None:  # wrong scores are never within a rate
        rec.status = "failed"
        rec.error = ErrorInfo(type="InvalidScores", traceback="",
                              message=f"the server answered 200 with scores that are not the "
                                      f"request's: {invalid.error}")
    if rec.status == "ok" and m.error_rate > plan.max_error_rate:
        rec.status = "failed"
        rec.error = ErrorInfo(
            type="HttpErrors", traceback="",
            message=f"{m.sent - m.ok} of {m.sent} requests failed ({m.error_rate:.1%}, more "
                    f"than max_error_rate {plan.max_error_rate:g}): {m.errors}; first: "
                    f"{m.first_error}")
    return rec

"""Measuring an `engine: http` case: a load of SGLang `POST /v1/score` requests against a
server, recorded request by request (`CaseRecord.http`, harness.records.HttpMetrics).

Request bodies are built as they are sent, on a thread of their own at most AHEAD ahead
(harness/under_test/feed.py), so memory does not grow with `requests:`: request i scores the
workload drawn with seed `workload.seed + i` (a JSONL workload: its request i, cycling), so
each request has its own query and a server's prefix cache only helps where it should;
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
import dataclasses
import traceback
from collections.abc import Callable

from mibench.engines import MibenchError, fact_problem

from ..case_kinds import CaseKind
from ..config.cases import CaseSpec, HttpPlan
from ..config.keys import id_part, short
from ..config.spec import HTTP_FIELDS
from ..host.busy import Window
from ..host.deadline import deadline
from ..records import (
    CaseRecord,
    ErrorInfo,
    HttpMetrics,
    HttpRequest,
    Metrics,
)
from ..records.metrics import score_digest
from ..records.summaries import latency_of, summarize
from . import cold_start, slo
from .feed import Bodies
from .send import INVALID, Sender, closed_loop, open_loop, warm_up


class RequestsCase(CaseKind):
    """A case of a server under load (engine http; module docstring). It keeps the case
    record's fields as they are (no schema change), so two of them read differently from a
    model case's: `compile_s` holds the first request's latency (the first warmup request,
    else the first measured one; None when it failed), and `params` the load plan
    (`HttpPlan.as_dict()`: clients or rate, requests, warmup_requests, ...), not a mode's
    options. The load's own figures are in `http` (and `slo`, `cold_start`)."""

    name = "requests"
    fields = frozenset(HTTP_FIELDS)
    interleaved = timed_interval = sharded = False
    no_engine_parity = " (a server's case: ab runs no parity for servers)"
    runs_idle = frozenset({"warmup", "timed", "processes"})
    runs_idle_why = "an http case's load is one timed run (runs.timeout_s and max_rss do apply)"
    # its time is its whole load (many requests): it has its own latency table
    results_note = (" An http case times a load of many requests, not one pass: its items/s is"
                    " over the load, and its request latencies are in the latency table.")
    parity_checks = frozenset({"concurrency", "prefix_cache"})
    items_every_run = False  # only answered requests' items count

    def measure(self, case: CaseSpec, pool, peak: Callable[[str], float | None],
                tick: Callable[[str], None], measuring: Callable[[], None] = lambda: None
                ) -> CaseRecord:
        """The load, with the machine's load over its requests (no chip peak: the work is
        the server's)."""
        window = Window()
        window.mark()
        rec = measure_http(case, pool, CaseRecord.started(case), tick, measuring)
        window.end()
        rec.load = window.load()
        return rec

    def plans(self, config, i: int, case, spec) -> list:
        """Its load plans (harness/under_test/expansion.py)."""
        from .expansion import plans

        return plans(config, i, case, spec)

    def runs(self, plan, section):
        """One load in one process (harness/under_test/expansion.py)."""
        from .expansion import runs

        return runs(plan, section)

    def problems(self, i: int, case) -> list:
        """Its keys' rules (harness/under_test/config_problems.py)."""
        from ..case_kinds import kind_of
        from .config_problems import key_problems

        return key_problems(i, case, kind_of(case.engine) is self)

    def flops_unknown(self, case: CaseSpec) -> str | None:
        """The server does the work: mibench does not count it."""
        return "a server's case"

    def tolerance(self, case: CaseSpec, apply_softmax: bool) -> float:
        """The case's `tolerance`, else its dtype's (harness/under_test/parity_checks.py)."""
        from .parity_checks import server_tolerance

        return server_tolerance(case, apply_softmax)

    def server(self, case: CaseSpec):
        """Its server: an address, or a launch to start (HttpPlan.server)."""
        return case.http.server

    def options_text(self, case) -> str:
        """The load plan (`clients=4 requests=64 ...`), not a mode's options."""
        return " ".join(f"{k}={short(v)}" for k, v in case.http.as_dict().items()) or "-"

    def label_parts(self, case: CaseSpec) -> list[str]:
        """A launched server's name and arguments."""
        launch = case.http.launch
        if launch is None:
            return []
        return ([id_part("server", launch.name)] if launch.name else []) + [
            id_part(k, v) for k, v in launch.args]

    def bound(self, case: CaseSpec, key) -> CaseSpec:
        """A launched server's case at the address its worker's key was bound to."""
        if case.http.base_url is not None or key.base_url is None:
            return case
        return dataclasses.replace(case, http=case.http.at(key.base_url))

    def measured_nothing(self, rec: CaseRecord) -> str | None:
        """No request answered."""
        if rec.http is not None and rec.http.ok == 0:
            return "is ok but no request was answered (http.ok is 0)"
        return None

    def report_tables(self, rows, records) -> dict:
        """Latency, servers, capacity, trials, cold starts (under_test/report_*.py)."""
        from . import report_latency as latency
        from . import report_servers as servers

        return {"latency": latency.latency_table(rows), "servers": latency.servers_table(rows),
                "capacity": servers.capacity_table(rows),
                "trials": servers.trials_table(records),
                "cold_starts": servers.cold_start_table(rows)}

    def report_charts(self, rows, stem, subject: str) -> dict:
        """The latency CDF and the capacity curve (under_test/report_*.py)."""
        from pathlib import Path

        from . import report_latency as latency
        from . import report_servers as servers

        return {"latency": latency.cdf_chart(rows, Path(f"{stem}-latency.png"), subject),
                "capacity": servers.capacity_chart(rows, Path(f"{stem}-capacity.png"),
                                                   subject)}

    def host_problems(self, case: CaseSpec) -> list:
        """A launched server's folder and interpreter (harness/under_test/config_problems.py)."""
        from .config_problems import host_problems

        return host_problems(case)

    def client_memory(self, case: CaseSpec) -> dict[str, float]:
        """The load generator's bodies and answers (harness/under_test/client_sizes.py)."""
        from .client_sizes import client_parts

        return client_parts(case.workload, case.http)

    def parity(self, g, cases: list[CaseSpec], checks: list[str]) -> list:
        """Its servers' `concurrency` and `prefix_cache` (harness/under_test/parity_checks.py)."""
        from .parity_checks import parity

        return parity(g, cases, checks)

    @property
    def server_ab(self):
        """`mibench ab` of two server versions (harness/under_test/ab.py)."""
        from . import ab

        return ab

    @property
    def jobs(self):
        """The developer jobs that measure servers under test (harness/under_test/jobs/)."""
        from .jobs import JOBS

        return JOBS

    def open_servers(self, folder, artifact_dir):
        """The run's ServerPool: the servers its cases launch (harness/under_test/pool.py)."""
        from .pool import ServerPool

        return ServerPool(folder, artifact_dir=artifact_dir)

    def after(self, case: CaseSpec, rec: CaseRecord, servers) -> None:
        """An ok case's cold starts, when it asks for them (harness/under_test/cold_start.py)."""
        if rec.status == "ok" and case.http.cold_starts:
            rec.cold_start = cold_start.measure(case, servers, case.engine_key)


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


def _send_all(case: CaseSpec, sender: Sender, warm: list[HttpRequest],
              measured: list[HttpRequest | None], tick: Callable[[str], None]) -> None:
    """The warmup requests one at a time, then the measured load (module docstring)."""
    plan = case.http
    warm_up(sender, plan.warmup_requests, warm, tick)
    first, n = plan.warmup_requests, plan.requests
    if plan.clients is not None:
        closed_loop(sender, first, n, plan.clients, measured)
    else:
        open_loop(sender, first, n, plan.rate, case.workload.seed, measured)
    tick("load")


def measure_http(case: CaseSpec, pool, rec: CaseRecord, tick: Callable[[str], None],
                 measuring: Callable[[], None] = lambda: None) -> CaseRecord:
    """Measure an http case (module docstring) into `rec`; any exception fails the case
    with what was measured before it."""
    plan = case.http
    rec.params = plan.as_dict()
    rec.metrics = Metrics()
    warm: list[HttpRequest] = []
    measured: list[HttpRequest | None] = [None] * plan.requests
    sender = None
    try:
        engine = pool.get(case.engine_key)
        rec.topology = rec.topology.with_engine(engine.topology)
        with deadline(case.runs.timeout_s):  # the model card is part of the case's time
            rec.resolved = engine.resolved_options(case.mode, {})
            problem = server_mismatch(rec.resolved.get("server") or {}, case)
            if problem is not None:
                raise problem
            bodies = Bodies(case, engine)
            measuring()
            if plan.slo is not None:  # the capacity search (under_test/slo.py)
                sender = Sender(plan, bodies, engine.base_url, count=plan.warmup_requests)
                warm_up(sender, plan.warmup_requests, warm, tick)
                rec.slo = slo.new_record(plan)
                slo.search(case, bodies, engine.base_url, rec.slo, measured, tick)
            else:
                sender = Sender(plan, bodies, engine.base_url)
                _send_all(case, sender, warm, measured, tick)
    except Exception as e:
        rec.status = "failed"
        rec.error = ErrorInfo(type=type(e).__name__, message=str(e),
                              traceback=traceback.format_exc())
    finally:
        if sender is not None:
            sender.close()
    rec.warmup_s = [r.latency_s for r in warm]
    done = [(r, i) for i, r in enumerate(measured) if r is not None]
    offset = plan.warmup_requests
    tokens = [sender.tokens[offset + i] for _, i in done] \
        if sender is not None and rec.slo is None else []
    m = http_metrics(plan, [r for r, _ in done], warm)
    rec.http = m
    first = (warm or [r for r, _ in done] or [None])[0]
    rec.compile_s = first.latency_s if first is not None and first.status == 200 else None
    if sender is not None and sender.first_scores is not None:
        rec.scores = [sender.first_scores]
        rec.metrics.score_digest = score_digest(rec.scores)
    if rec.slo is not None:  # timed: the repeats at the rate found
        slo.case_numbers(rec)
    else:
        case_numbers(rec, m, sum(t for (r, _), t in zip(done, tokens, strict=True)
                                 if r.status == 200))
    invalid = next((r for r in [*warm, *(r for r, _ in done)] if r.status == INVALID), None)
    if rec.status == "ok" and invalid is not None:  # wrong scores are never within a rate
        rec.status = "failed"
        rec.error = ErrorInfo(type="InvalidScores", traceback="",
                              message=f"the server answered 200 with scores that are not the "
                                      f"request's: {invalid.error}")
    if rec.status == "ok" and rec.slo is None and m.error_rate > plan.max_error_rate:
        rec.status = "failed"
        rec.error = ErrorInfo(
            type="HttpErrors", traceback="",
            message=f"{m.sent - m.ok} of {m.sent} requests failed ({m.error_rate:.1%}, more "
                    f"than max_error_rate {plan.max_error_rate:g}): {m.errors}; first: "
                    f"{m.first_error}")
    return rec


REQUESTS_CASE = RequestsCase()  # the kind of http cases (harness/case_kinds.py)

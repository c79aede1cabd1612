"""The capacity of a server under a latency budget (an http case with `slo:`): the highest
open-loop Poisson rate whose measured percentile of the answered requests meets the budget,
with at most `max_error_rate` of the requests failed (docs/configs.md, "Capacity under a
latency budget").

After the case's warmup requests, each step sends `slo.requests` requests at one rate
(arrivals seeded by the workload's seed + the step's index; request bodies continue the
case's sequence, so every step scores requests of its own) and is judged by
harness/stats/capacity.py, which also picks the next rate: up by 2x until a rate misses,
then the bracket cut at its geometric middle until it is within the precision. A step
stops sending as soon as enough requests were answered over the budget, failed, or are
still in flight past the budget (they will be answered over it, or fail) to miss it
whatever the rest would do: a server far past its capacity is judged within about the
budget, not after the backlog of its answers. Those in flight still end, so the next step
starts on a drained server. A client that surely sent more than 5% of a step's requests late (its
threads could not keep the schedule) stops the search: the record says the client, not the
server, fell behind.

At the rate found, `repeats` more steps (fresh arrival seeds, never stopped early) are the
case's timed runs: items/s at the budget is their median, and compare and ab judge the
capacity from them like a time (per item, + = worse). A rate met in no majority of its
repeats (harness.stats.capacity.held: the search stopped at the knee, where one seed meets
and the next misses) is backed off one precision step (rate / (1 + precision)) and
repeated there, at most MAX_BACKOFFS times; the repeats that did not hold join the curve's
steps. Held nowhere: `not held`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from ..config.cases import CaseSpec, HttpPlan
from ..records import CaseRecord, HttpRequest, SloRecord, SloStep
from ..records.summaries import latency_of, summarize
from ..stats import capacity
from .feed import Bodies
from .send import Sender, open_loop

REPEAT_SEED = 1000  # repeat j's arrivals: seed + REPEAT_SEED + j (steps use seed + k)


def new_record(plan: HttpPlan) -> SloRecord:
    """The search's record before its first step (filled as it goes)."""
    s = plan.slo
    return SloRecord(percentile=s.percentile, budget_ms=s.budget_ms,
                     max_error_rate=s.max_error_rate, precision=s.precision,
                     requests_per_step=s.requests,
                     min_requests=capacity.min_samples(s.percentile),
                     samples_why=capacity.samples_why(s.percentile, s.requests),
                     start_rate=s.start_rate, min_rate=s.min_rate, max_rate=s.max_rate,
                     max_steps=s.max_steps, status="failed")


def step(plan: HttpPlan, bodies: Bodies, base_url: str, rate: float, seed: int,
         first: int, early: bool) -> tuple[SloStep, list[HttpRequest]]:
    """One load of `plan.slo.requests` requests (bodies `first`...) at `rate`, judged; with
    `early`, stopped once its miss is certain."""
    s, n = plan.slo, plan.slo.requests
    limit = int(s.max_error_rate * n)  # failures a step may have
    counts = {"over": 0, "failed": 0}

    def enough(r: HttpRequest | None, overdue: int) -> bool:
        if r is not None and r.status != 200:
            counts["failed"] += 1
        elif r is not None and 1000 * r.latency_s > s.budget_ms:
            counts["over"] += 1
        return early and capacity.decided_miss(counts["over"], counts["failed"], overdue, n,
                                               s.percentile, limit)

    sender = Sender(plan, bodies, base_url, first=first, count=n)
    out: list[HttpRequest | None] = [None] * n
    try:
        open_loop(sender, first, n, rate, seed, out, enough, overdue_s=s.budget_ms / 1000)
    finally:
        sender.close()
    done = [r for r in out if r is not None]
    return describe(done, rate, seed, plan, stopped=len(done) < n), done


def describe(done: list[HttpRequest], rate: float, seed: int, plan: HttpPlan,
             stopped: bool) -> SloStep:
    """A step's record from its requests (pure)."""
    s = plan.slo
    ok = [r for r in done if r.status == 200]
    ms = sorted(1000 * r.latency_s for r in ok)
    late_s = capacity.late_after(rate)
    late = sum(1 for r in done if (r.lag_s or 0.0) > late_s)
    judged = capacity.judge_step(ms, len(done), len(done) - len(ok), late, s.percentile,
                                 s.budget_ms, s.max_error_rate, stopped)
    span = (max(r.sent_s + r.latency_s for r in done) - min(r.sent_s for r in done)) \
        if done else None
    per_s = span is not None and span > 0
    lat = latency_of(ms)
    low, high = capacity.percentile_interval(ms, s.percentile)
    lags = sorted(1000 * (r.lag_s or 0.0) for r in done)
    return SloStep(
        rate=rate, seed=seed, sent=len(done), ok=len(ok),
        error_rate=(len(done) - len(ok)) / len(done) if done else 0.0, stopped_early=stopped,
        duration_s=span, achieved_rate=len(ok) / span if per_s else None,
        items_per_s=sum(r.items for r in ok) / span if per_s else None,
        p50_ms=lat and lat.p50_ms, p90_ms=lat and lat.p90_ms, p99_ms=lat and lat.p99_ms,
        max_ms=lat and lat.max_ms,
        percentile_ms=capacity.nearest_rank(ms, s.percentile) if ms else None,
        percentile_low_ms=low, percentile_high_ms=high,
        over_budget=sum(1 for x in ms if x > s.budget_ms), late_share=late / len(done)
        if done else 0.0, late_s=late_s,
        lag_p99_ms=capacity.nearest_rank(lags, 99) if lags else None,
        client_saturated=judged.saturated, meets=judged.meets, why=judged.why)


def search(case: CaseSpec, bodies: Bodies, base_url: str, record: SloRecord,
           measured: list[HttpRequest | None], tick: Callable[[str], None],
           repeats: bool = True) -> None:
    """The search and (`repeats`) the repeats at the rate found, into `record`; `measured`
    gets the first repeat's requests (the case's `http` record)."""
    plan, s = case.http, case.http.slo
    seed, n = case.workload.seed, s.requests
    finder = capacity.RateSearch(s.start_rate, s.min_rate, s.max_rate, s.precision,
                                 s.max_steps)
    first = plan.warmup_requests
    while (rate := finder.next_rate()) is not None:
        k = len(record.steps)
        done, _ = step(plan, bodies, base_url, rate, seed + k, first + k * n, early=True)
        record.steps.append(done)
        finder.observe(rate, capacity.Judged(done.meets, done.client_saturated, done.why))
        tick(f"slo {rate:.3g}/s {'met' if done.meets else 'missed'}")
    record.status = finder.status
    record.rate, record.bound = finder.result()
    if record.rate is None or not repeats:
        record.note = note(record)
        return
    first += len(record.steps) * n
    backed: list[tuple[float, int, int]] = []  # (rate, met, repeats) of each rate backed off
    while True:
        repeat_at(case, bodies, base_url, record, measured, tick,
                  len(backed) * s.repeats, first)
        if capacity.held(record.met_repeats, len(record.repeats)) \
                or len(backed) == capacity.MAX_BACKOFFS:
            break
        lower = capacity.back_off(record.rate, s.precision, s.min_rate)
        if lower is None:
            break
        # the repeats that did not hold stay on the curve (full steps, missed at this rate)
        backed.append((record.rate, record.met_repeats, len(record.repeats)))
        record.steps.extend(record.repeats)
        record.rate, record.bound = lower, record.rate
    if not capacity.held(record.met_repeats, len(record.repeats)):
        record.status = "not held"
    rates = [r.items_per_s for r in record.repeats if r.items_per_s]
    record.items_per_s = statistics.median(rates) if rates else None
    record.note = note(record, backed)


def repeat_at(case: CaseSpec, bodies: Bodies, base_url: str, record: SloRecord,
              measured: list[HttpRequest | None], tick: Callable[[str], None], done: int,
              first: int) -> None:
    """`slo.repeats` full steps at `record.rate` into `record.repeats` (and `met_repeats`);
    `done` repeats came before (their seeds and bodies are not reused); `measured` gets the
    first one's requests."""
    plan, s = case.http, case.http.slo
    seed, n = case.workload.seed + REPEAT_SEED, s.requests
    record.repeats = []
    for j in range(done, done + s.repeats):
        step_record, requests = step(plan, bodies, base_url, record.rate, seed + j,
                                     first + j * n, early=False)
        record.repeats.append(step_record)
        if j == done:
            measured[:len(requests)] = requests
        tick(f"slo repeat {j - done + 1}/{s.repeats} at {record.rate:.3g}/s")
    record.met_repeats = sum(r.meets for r in record.repeats)


def note(r: SloRecord, backed: list[tuple[float, int, int]] = ()) -> str:
    """One sentence: what the search found (or why it found nothing); `backed`: the rates
    that did not hold in their repeats, (rate, met, repeats) each, highest first."""
    p = f"p{r.percentile:g} <= {r.budget_ms:g} ms"
    tried = max((x.rate for x in r.steps), default=None)
    if r.status == "found":
        held = f"; met in {r.met_repeats} of {len(r.repeats)} repeats" if r.repeats else ""
        ips = f" ({r.items_per_s:.3g} items/s)" if r.items_per_s else ""
        return (f"{r.rate:.3g} requests/s{ips} at {p}, missed at {r.bound:.3g} "
                f"(precision {r.precision:.0%}, {len(r.steps)} steps of "
                f"{r.requests_per_step} requests){held}{_backed(backed)}")
    if r.status == "not held":
        return (f"{r.rate:.3g} requests/s met {p} in {r.met_repeats} of the {len(r.repeats)} "
                f"repeats at it, no majority{_backed(backed)}: no capacity claimed (the "
                "server's latency or the machine's load changed under the search)")
    if r.status == "imprecise":
        return (f"between {r.rate:.3g} and {r.bound:.3g} requests/s at {p}: max_steps "
                f"{r.max_steps} ran out before the precision {r.precision:.0%}")
    if r.status == "not bound":
        return (f"{p} met up to max_rate {r.max_rate:g} requests/s: the budget never bound, "
                "so no capacity is claimed (raise slo.max_rate)")
    if r.status == "not met":
        return f"{p} missed down to min_rate {r.min_rate:g} requests/s"
    if r.status == "client saturated":
        last = r.steps[-1]
        return (f"the client could not offer {last.rate:.3g} requests/s ({last.why}); the "
                f"server met the budget up to {_met(r)}: capacity not found")
    return f"stopped after {len(r.steps)} steps (highest rate tried {tried})"


def _backed(backed: list[tuple[float, int, int]]) -> str:
    if not backed:
        return ""
    rates = ", ".join(f"{rate:.3g} requests/s (met in {met} of {n} repeats)"
                      for rate, met, n in backed)
    return f"; backed off one precision step from {rates}"


def _met(r: SloRecord) -> str:
    met = [x.rate for x in r.steps if x.meets]
    return f"{max(met):.3g} requests/s" if met else "no rate tried"


def case_numbers(rec: CaseRecord) -> None:
    """The case's timed runs: the repeats' durations; items/s at the budget."""
    reps = [r for r in rec.slo.repeats if r.duration_s and r.items_per_s]
    rec.timed_s = [r.duration_s for r in reps]
    rec.metrics.total_s = summarize(rec.timed_s)
    rec.metrics.throughput_items_per_s = summarize([r.items_per_s for r in reps])
    rec.metrics.latency_per_item_ms = summarize([1000.0 / r.items_per_s for r in reps])

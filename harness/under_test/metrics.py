"""A server A/B's capacity and cold starts (harness/under_test/ab.py calls these for cases
with `slo:` and `cold_start:`), judged by the paired test of the rounds like a time: `+` =
worse.

**Capacity.** Each side's search (harness/under_test/slo.py) runs once, base first, on its own
server, without the repeats; then each round measures each side at its own rate found (the
round's order alternating, a fresh arrival seed per round, never stopped early). A round's
sample is that step's time per item at the budget (1 / items/s); the round's log ratio new
over base is the paired test's d, with the threshold at least the searches' precision. A
side that found no capacity leaves the case inconclusive (base: untested), naming it.

**Cold starts.** Each round launches each side's server afresh (the round's order), times
it to ready and its first request (harness/under_test/cold_start.py), and stops it; the paired
test of ln(new / base) over the rounds judges `launch to ready` and `first request`. A
regression of either is the case's `cold start regression` where nothing worse was found.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ..config.cases import CaseSpec
from ..judge.paired import paired_test
from ..records import ColdStartRecord
from ..records.ab import ABCase, RoundSample, Timing
from ..verdicts import (
    COLD_START_REGRESSION,
    INCONCLUSIVE,
    REGRESSION,
    UNTESTED,
)
from . import cold_start, slo
from .send import Sender, warm_up

ROUND_SEED = 2000  # round r's arrivals: seed + ROUND_SEED + r

Note = Callable[[str], None]


def capacity_rounds(case: CaseSpec, sides: dict, order: list[list[str]], ab_case: ABCase,
                    alpha: float, min_effect: float, note: Note) -> None:
    """Both sides' searches, then the rounds at their rates (module docstring); fills the
    case's samples, `slo`, `timing` and verdict."""
    plan = case.http
    for name in ("base", "new"):
        side = sides[name]
        sender = Sender(plan, side.bodies, side.url, count=plan.warmup_requests)
        try:
            warm_up(sender, plan.warmup_requests, [], lambda _: None)
        finally:
            sender.close()
        record = slo.new_record(plan)
        slo.search(case, side.bodies, side.url, record, [], lambda s, n=name: note(
            f"{n} {case.case_id}: {s}"), repeats=False)
        ab_case.slo[name] = record
    lost = {n: r for n, r in ab_case.slo.items() if r.rate is None}
    if lost:
        ab_case.verdict = UNTESTED if "base" in lost else INCONCLUSIVE
        ab_case.why = "no capacity found: " + "; ".join(f"{n}: {r.note}"
                                                         for n, r in lost.items())
        return
    for r, names in enumerate(order):
        for position, name in enumerate(names):
            side, rate = sides[name], ab_case.slo[name].rate
            first = plan.warmup_requests + (len(ab_case.slo[name].steps) + r) * plan.requests
            step, _ = slo.step(plan, side.bodies, side.url, rate,
                               case.workload.seed + ROUND_SEED + r, first, early=False)
            ok = bool(step.items_per_s)
            getattr(ab_case, name).append(RoundSample(
                round=r, first=position == 0, status="ok" if ok else "failed",
                error=None if ok else step.why, timed_s=[1 / step.items_per_s] if ok else [],
                median_s=1 / step.items_per_s if ok else None))
            note(f"round {r + 1} {name} {case.case_id}: {rate:.3g}/s, {step.why}")
    precision = max(plan.slo.precision, min_effect)
    d = [math.log(n.median_s / b.median_s) for b, n in zip(ab_case.base, ab_case.new,
                                                            strict=False)
         if b.median_s and n.median_s]
    test = paired_test(d, alpha, precision)
    ab_case.timing = Timing(**test.as_dict(), round_log_ratios=d)
    ab_case.verdict = test.verdict
    ab_case.why = (f"capacity at p{plan.slo.percentile:g} <= {plan.slo.budget_ms:g} ms "
                   f"(time per item at the budget, threshold {precision:.0%}): {test.line()}")


def cold_rounds(case: CaseSpec, pools: dict, order: list[list[str]], ab_case: ABCase,
                alpha: float, min_effect: float, note: Note) -> None:
    """One fresh launch per side per round; the paired tests of ready and first request."""
    for name in ("base", "new"):
        ab_case.cold_start[name] = ColdStartRecord(warm_requests=case.http.warm_requests)
    for r, names in enumerate(order):
        for name in names:
            launch = cold_start.one_launch(case, pools[name], case.engine_key, r)
            ab_case.cold_start[name].launches.append(launch)
            took = launch.error or (f"ready {launch.ready_s:.3g} s, first "
                                    f"{launch.first_ms:.0f} ms")
            note(f"round {r + 1} {name} {case.case_id}: cold start {took}")
    worst = None
    for label, field in (("launch to ready", "ready_s"), ("first request", "first_ms")):
        pairs = zip(ab_case.cold_start["base"].launches, ab_case.cold_start["new"].launches,
                    strict=True)
        d = [math.log(getattr(n, field) / getattr(b, field)) for b, n in pairs
             if getattr(b, field) and getattr(n, field)]
        test = paired_test(d, alpha, min_effect)
        ab_case.cold_timing[label] = Timing(**test.as_dict(), round_log_ratios=d)
        if test.verdict == REGRESSION and worst is None:
            worst = f"cold start: {label}: {test.line()}"
    if worst is not None and ab_case.verdict != REGRESSION:
        ab_case.verdict = COLD_START_REGRESSION
        ab_case.why = f"{worst}; {ab_case.why}" if ab_case.why else worst

"""The `prefix_cache` parity check: a server must score a request the same whether its
prefix cache is cold or warm. It needs no reference engine, only the server.

One trial: a fresh launch of the server as its case starts it (cache on) scores the same
`REQUESTS` requests one at a time, twice: `cold` (the first answers the server ever gives;
requests 2 and 4 share the query of requests 1 and 3 with other items, so they may already
find that query cached) and `warm` (the same requests again, every sequence seen before).
Every request's warm log scores must equal its cold ones within the server's tolerance
(its case's `tolerance`, else the dtype's modes tolerance). Each trial has a control beside
it: the same server launched with its case's `cache_off` arguments (the cache off), scored
the same way; trials alternate, on then off.

Such failures come and go with timing, like `concurrency`'s: `trials: N` fresh launches of
each, the fails out of N with a 95% Clopper-Pearson interval, judged against
`max_fail_rate` on the observed rate of the cache-on trials; the control's rate beside it
says whether the cache is to blame (the control held) or cold and warm differ without it.
"""

from __future__ import annotations

import dataclasses

from mibench.workloads import Request, WorkloadSpec, generate

from ..config.keys import EngineKey
from ..config.server import ServerLaunch
from ..records import ConcurrencyTrial, ParityCheck, PrefixCacheControl
from . import concurrency as cc

REQUESTS = 4  # two queries, each with two item sets
WHEN = "warm answers (the same requests again: their prefixes cached)"


def requests_of(spec: WorkloadSpec, vocab: int, exclude, seed: int) -> list[Request]:
    """Requests 1 and 3: the parity workload at seeds `seed`, `seed + 1`; requests 2 and 4:
    the same queries with the items of seeds `seed + 2`, `seed + 3` (a shared prefix)."""
    out = []
    for i in range(REQUESTS // 2):
        first = generate(spec.replace(seed=seed + i), vocab, exclude)
        other = generate(spec.replace(seed=seed + REQUESTS // 2 + i), vocab, exclude)
        out += [first, Request(query=first.query, items=other.items)]
    return out


def cache_off(key: EngineKey, args: tuple[tuple[str, object], ...]) -> EngineKey:
    """`key` whose launch has `args` over its server arguments: the same server with its
    cache off (the control)."""
    launch: ServerLaunch = key.launch
    merged = tuple({**dict(launch.args), **dict(args)}.items())
    server = dataclasses.replace(key.server, launch=ServerLaunch(launch.launch, merged))
    return dataclasses.replace(key, server=server)


def run_trial(engine, spec: WorkloadSpec, requests: list[Request]) -> cc.Trial:
    """One trial's two passes, cold then warm, one request at a time."""
    cold = cc.score_alone(engine, spec, requests)
    warm = cc.score_alone(engine, spec, requests)
    return cc.Trial(cold, {"warm": warm})


def trial_record(t: int, trial: cc.Trial, tol: float,
                 startup_s: float | None) -> ConcurrencyTrial:
    """Trial `t`'s record: what moved between cold and warm, largest first."""
    found = trial.moved(tol)["warm"]
    worst = cc.log_diff(trial.alone, trial.passes["warm"])
    return ConcurrencyTrial(
        trial=t, status="failed" if found else "passed", startup_s=startup_s,
        max_log_diff=worst, moved_requests=len({m.request for m in found}),
        moved_items=len(found), when=[WHEN] if found else [],
        moved=[m.line() for m in found[:cc.SHOWN]])


def cold_apart(on: cc.Trial, off: cc.Trial) -> float:
    """The largest |d ln score| between the cache-on and the cache-off launch's first
    answers of one trial: what the cache changes before anything is warm (the requests
    that share a query find it cached already)."""
    return cc.log_diff(on.alone, off.alone)


def judge(label: str, against: str, tol: float, on: list[ConcurrencyTrial],
          off: list[ConcurrencyTrial], args: dict, max_fail_rate: float,
          apart: list[float] = ()) -> ParityCheck:
    """The check over its trials: the cache-on fail rate against `max_fail_rate`, the
    control's beside it (a trial that could not run makes it an error); `apart`, each
    trial's cold answers cache on against off (`cold_apart`), is recorded and said, not
    judged."""
    check = cc.judge_trials(label, against, tol, on, max_fail_rate, check="prefix_cache",
                            requests=REQUESTS, moved_how="warm")
    check.trials = on
    fails = sum(t.status == "failed" for t in off)
    low, high = cc.fail_interval(fails, len(off))
    check.control = PrefixCacheControl(
        server_args=args, trials=off, fails=fails, fail_rate=fails / len(off), fail_low=low,
        fail_high=high, max_log_diff=max((t.max_log_diff or 0.0 for t in off), default=0.0),
        on_vs_off_max_log_diff=max(apart, default=None))
    errors = [t for t in off if t.status == "error"]
    if errors and check.status != "error":
        check.status = "error"
        check.error = f"control trial {errors[0].trial + 1} of {len(off)}: {errors[0].error}"
        return check
    if check.status == "error":
        return check
    control = (f"the control (cache off: {_args(args)}) failed {fails} of {len(off)} "
               f"({fails / len(off):.0%}; 95% interval {low:.0%} to {high:.0%})")
    blame = ("cold and warm differ without the cache too: not the cache alone" if fails
             else "the control held: the cache's doing")
    if apart:
        control += (f"; first answers cache on against off: max |d ln| {max(apart):.3g}"
                    + (" (beyond the tolerance: the cache changes scores before anything is "
                       "warm)" if max(apart) > tol else ""))
    if check.status == "failed":
        check.error = f"{check.error}; {control}: {blame}"
    else:
        check.error = "; ".join(x for x in (check.error, control) if x)
    return check


def _args(args: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in args.items())

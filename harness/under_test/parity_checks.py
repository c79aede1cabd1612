"""Parity checks of a server under test (docs/parity.md): `concurrency` (harness/under_test/
concurrency.py) and `prefix_cache` (harness/under_test/prefix_cache.py), each over trials on
fresh launches of a server mibench starts (`GroupParity.servers`, the run's ServerPool),
or trials on the running one where that is allowed."""

from __future__ import annotations

import contextlib

from ..config.keys import EngineKey
from ..config.matrix import CaseSpec
from ..records import ParityCheck
from ..run.labels import engine_label
from ..run.parity import one_per_engine
from ..run.tolerances import tolerances


def server_tolerance(case: CaseSpec, apply_softmax: bool = False) -> float:
    """The log tolerance of a server's score checks: its case's `tolerance`, else the
    modes tolerance of its dtype (float32 1e-5, bfloat16 1e-1)."""
    given = case.http.tolerance
    return given if given is not None else tolerances("modes", case.dtype, apply_softmax)[0]


def concurrency_check(g, case: CaseSpec) -> ParityCheck:
    """The `concurrency` check of one server: its trials, each on a fresh launch when
    mibench launches it (harness/under_test/concurrency.py)."""
    from . import concurrency as cc

    tol = server_tolerance(case, g.spec.apply_softmax)
    label, k, plan = engine_label(case), cc.REQUESTS, case.http
    launched = plan.launch is not None and g.servers is not None
    against = (f"the same {k} requests alone, first on a fresh server" if launched
               else f"the same {k} requests alone")
    if plan.trials > 1:
        against += f", {plan.trials} {'fresh launches' if launched else 'trials'}"
    try:
        facts = g.pool.get(case.engine_key)
        vocab, exclude = facts.model_config.vocab_size, facts.special_ids
        reqs = cc.requests_of(g.spec, vocab, exclude, k, g.spec.seed)
        others = cc.requests_of(g.spec, vocab, exclude, k, g.spec.seed + k)
        key = g.pool.bind(case.engine_key)
    except Exception as e:  # a server error is a parity error, not a crash
        return ParityCheck(check="concurrency", case_id=label, tolerance=tol, status="error",
                           against=against, error=f"{type(e).__name__}: {e}")
    trials = [_trial(g, case, key, launched, (reqs, others), tol, t)
              for t in range(plan.trials)]
    return cc.judge_trials(label, against, tol, trials, plan.max_fail_rate)


def _trial(g, case: CaseSpec, key: EngineKey, launched: bool, requests,
           tol: float, t: int):
    """Trial `t` of the concurrency check: its record (an error is a trial's, not a
    crash)."""
    from mibench.engines import load_engine

    from ..records import ConcurrencyTrial
    from . import concurrency as cc

    fresh = g.servers.fresh(case.engine_key, f"-fresh{t + 1}") if launched else \
        contextlib.nullcontext((key.base_url, None))
    try:
        with fresh as (url, startup_s):
            local = load_engine("http", **key.bound_to(url).load_kwargs())
            trial = cc.run_trial(local, g.spec, *requests)
        return cc.trial_record(t, trial, tol, startup_s)
    except Exception as e:  # a server that did not start, or an answer that was not scores
        return ConcurrencyTrial(trial=t, status="error", error=f"{type(e).__name__}: {e}")


def prefix_cache_check(g, case: CaseSpec) -> ParityCheck:
    """The `prefix_cache` check of one server: its trials, each a fresh launch with its
    cache on beside a fresh launch with it off (harness/under_test/prefix_cache.py)."""
    from . import prefix_cache as pc

    tol = server_tolerance(case, g.spec.apply_softmax)
    plan, label = case.http, engine_label(case)
    against = (f"the same {pc.REQUESTS} requests cold, on a fresh server, {plan.prefix_trials} "
               f"fresh launch(es), beside the server with its cache off")
    if g.servers is None or plan.launch is None:
        return ParityCheck(check="prefix_cache", case_id=label, against=against, tolerance=tol,
                           status="error", error="needs fresh launches of a server mibench "
                           "starts (launch)")
    try:
        facts = g.pool.get(case.engine_key)
        reqs = pc.requests_of(g.spec, facts.model_config.vocab_size, facts.special_ids,
                              g.spec.seed)
    except Exception as e:  # a server error is a parity error, not a crash
        return ParityCheck(check="prefix_cache", case_id=label, tolerance=tol, status="error",
                           against=against, error=f"{type(e).__name__}: {e}")
    off_key = pc.cache_off(case.engine_key, plan.cache_off)
    on, off, apart = [], [], []
    for t in range(plan.prefix_trials):
        got = {}
        for key, tag, trials in ((case.engine_key, "-cache-on", on),
                                 (off_key, "-cache-off", off)):
            record, got[tag] = _cache_trial(g, key, tag, reqs, tol, t)
            trials.append(record)
        if all(x is not None for x in got.values()):  # first answers, cache on against off
            apart.append(pc.cold_apart(got["-cache-on"], got["-cache-off"]))
    return pc.judge(label, against, tol, on, off, dict(plan.cache_off),
                    plan.prefix_max_fail_rate, apart)


def _cache_trial(g, key: EngineKey, tag: str, reqs, tol: float, t: int):
    """Trial `t` of the prefix_cache check on a fresh launch of `key`: its record and its
    passes (None when it could not run: an error is the trial's, not a crash)."""
    from mibench.engines import load_engine

    from ..records import ConcurrencyTrial
    from . import prefix_cache as pc

    try:
        with g.servers.fresh(key, f"{tag}{t + 1}") as (url, startup_s):
            engine = load_engine("http", **key.bound_to(url).load_kwargs())
            trial = pc.run_trial(engine, g.spec, reqs)
            return pc.trial_record(t, trial, tol, startup_s), trial
    except Exception as e:  # a server that did not start, or an answer that was not scores
        return ConcurrencyTrial(trial=t, status="error", error=f"{type(e).__name__}: {e}"), None


def parity(g, cases: list[CaseSpec], checks: list[str]) -> list[ParityCheck]:
    """The `concurrency` and `prefix_cache` checks of the servers of `cases` (http cases),
    one per engine key, in that order."""
    out = []
    if "concurrency" in checks:
        out += [concurrency_check(g, case) for case in one_per_engine(cases)]
    if "prefix_cache" in checks:
        out += [prefix_cache_check(g, case)
                for case in one_per_engine(c for c in cases if c.http.prefix_trials)]
    return out

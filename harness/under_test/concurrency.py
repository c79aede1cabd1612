"""The `concurrency` parity check: a server must give a request the same scores whatever
else it is doing. It needs no reference engine, only the server.

One trial, on a fresh launch of a server mibench starts: the same K requests (the parity
workload drawn with seeds `seed + i`) are scored one at a time (`alone`: the first answers
the server ever gives), then all in flight together, mixed with K other requests (seeds
`seed + K + i`) sent at the same moment, each on its own connection (`first load`), then
the same mix again (`warm load`), then the K alone again (`warm alone`). Every request's
scores in the three later passes must equal its first scores alone within the modes
tolerance on log scores (1e-5 in float32; docs/parity.md, "Tolerances"). A server that
batches requests whose rows then interact, whose batched kernels round differently from
its single-request ones, or whose first batches race while it compiles, fails it; the
trial names the requests and items that moved, by how much, and when in the server's
life (`WHEN`).

Such failures come and go with timing, so one trial proves little: `trials: N` repeats it
on N fresh launches and the check reports the fails out of N with a 95% Clopper-Pearson
interval (`fail_interval`), judged against `max_fail_rate` on the observed rate.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy as np

from mibench.workloads import Request, WorkloadSpec, generate

from ..records import ConcurrencyTrial, ParityCheck

REQUESTS = 8  # K: the requests compared; as many others are mixed in
SHOWN = 10  # moved scores named in the check's record, largest first
INTERVAL = "Clopper-Pearson (exact binomial), 95%"
# when in the server's life a request's scores moved, by the first pass that shows it
WHEN = {"warm alone": "first answers after launch (alone, they differ from the warm "
                      "server's answers alone)",
        "first load": "first batches under load (the warm load did not move them)",
        "warm load": "later: the warm server under load"}


@dataclasses.dataclass(frozen=True)
class Moved:
    """Request `request`'s item `item` moved by `log_diff` (max over its labels)."""

    request: int
    item: int
    log_diff: float

    def line(self) -> str:
        return f"request {self.request} item {self.item}: |d log| {self.log_diff:.3g}"


def requests_of(spec: WorkloadSpec, vocab: int, exclude, n: int, first_seed: int
                ) -> list[Request]:
    """`n` requests of the parity workload, seeds `first_seed`, `first_seed + 1`, ..."""
    return [generate(spec.replace(seed=first_seed + i), vocab, exclude) for i in range(n)]


def score_alone(engine, spec: WorkloadSpec, requests: list[Request]) -> list[np.ndarray]:
    """Each request's scores, one request at a time."""
    return [_score(engine, spec, r) for r in requests]


def score_together(engine, spec: WorkloadSpec, requests: list[Request],
                   others: list[Request]) -> list[np.ndarray]:
    """Each request's scores with every request and every other one in flight at once
    (a thread each; the http engine keeps one connection per thread). The order of
    sending is interleaved: request 0, other 0, request 1, other 1, ..."""
    mixed = [x for pair in zip(requests, others, strict=True) for x in pair]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(mixed)) as pool:
        futures = [pool.submit(_score, engine, spec, r) for r in mixed]
        scores = [f.result() for f in futures]
    return scores[0::2]


def _score(engine, spec: WorkloadSpec, r: Request) -> np.ndarray:
    kw = {} if spec.semantics is None else {"semantics": spec.semantics}
    out = engine.score(list(r.query), [list(i) for i in r.items], list(spec.label_token_ids),
                       mode="single", apply_softmax=spec.apply_softmax,
                       delimiter=spec.delimiter, **kw)
    return np.asarray(out.scores, dtype=np.float64)


def moved(alone: list[np.ndarray], together: list[np.ndarray], tol: float) -> list[Moved]:
    """Every item whose log scores moved by more than `tol`, largest first."""
    tiny = np.finfo(np.float64).tiny
    out = []
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        if a.shape != b.shape:
            raise ValueError(f"request {i}: {a.shape} scores alone, {b.shape} under load")
        d = np.abs(np.log(np.maximum(a, tiny)) - np.log(np.maximum(b, tiny))).max(axis=1)
        out += [Moved(i, int(j), float(d[j])) for j in np.flatnonzero(d > tol)]
    return sorted(out, key=lambda m: -m.log_diff)


@dataclasses.dataclass(frozen=True)
class Trial:
    """One trial's passes (each a score table per request) and what moved in each."""

    alone: list[np.ndarray]
    passes: dict[str, list[np.ndarray]]  # "first load", "warm load", "warm alone"

    def moved(self, tol: float) -> dict[str, list[Moved]]:
        return {name: moved(self.alone, tables, tol) for name, tables in self.passes.items()}


def run_trial(engine, spec: WorkloadSpec, requests: list[Request],
              others: list[Request]) -> Trial:
    """The four passes of one trial (module docstring), in order."""
    alone = score_alone(engine, spec, requests)
    first = score_together(engine, spec, requests, others)
    warm = score_together(engine, spec, requests, others)
    again = score_alone(engine, spec, requests)
    return Trial(alone, {"first load": first, "warm load": warm, "warm alone": again})


def when_moved(found: dict[str, list[Moved]]) -> dict[int, str]:
    """Each moved request's `WHEN` key: moved alone on the warm server (its first answers
    were off), else moved in the first load only, else moved in the warm load."""
    out: dict[int, str] = {}
    for name in ("warm alone", "first load", "warm load"):
        for m in found.get(name, []):
            if name == "first load" and any(x.request == m.request
                                            for x in found.get("warm load", [])):
                continue
            out.setdefault(m.request, name)
    return out


def fail_interval(fails: int, trials: int) -> tuple[float, float]:
    """The 95% Clopper-Pearson interval of a fail rate of `fails` out of `trials`."""
    from scipy.stats import binomtest

    ci = binomtest(fails, trials).proportion_ci(0.95, method="exact")
    return float(ci.low), float(ci.high)


def trial_record(t: int, trial: Trial, tol: float,
                 startup_s: float | None) -> ConcurrencyTrial:
    """Trial `t`'s record: what moved in any pass, largest first, and when."""
    found = trial.moved(tol)
    every = sorted((m for ms in found.values() for m in ms), key=lambda m: -m.log_diff)
    when = when_moved(found)
    worst = max((float(log_diff(trial.alone, tables)) for tables in trial.passes.values()),
                default=0.0)
    return ConcurrencyTrial(
        trial=t, status="failed" if every else "passed", startup_s=startup_s,
        max_log_diff=worst, moved_requests=len({m.request for m in every}),
        moved_items=len({(m.request, m.item) for m in every}),
        when=sorted({WHEN[w] for w in when.values()}),
        moved=[f"{m.line()} ({when[m.request]})" for m in _unique(every)[:SHOWN]])


def _unique(moves: list[Moved]) -> list[Moved]:
    """The largest move of each (request, item)."""
    seen, out = set(), []
    for m in moves:
        if (m.request, m.item) not in seen:
            seen.add((m.request, m.item))
            out.append(m)
    return out


def log_diff(alone: list[np.ndarray], tables: list[np.ndarray]) -> float:
    tiny = np.finfo(np.float64).tiny
    return max((float(np.abs(np.log(np.maximum(a, tiny)) - np.log(np.maximum(b, tiny))).max())
                for a, b in zip(alone, tables, strict=True)), default=0.0)


def judge_trials(label: str, against: str, tol: float, trials: list[ConcurrencyTrial],
                 max_fail_rate: float, check: str = "concurrency", requests: int = REQUESTS,
                 moved_how: str = "under load") -> ParityCheck:
    """The check over its trials: fails out of N, the observed rate with its interval,
    passed when that rate is within `max_fail_rate` (a trial that could not run makes it
    an error: nothing to judge it by). `check`, `requests` and `moved_how` name the check,
    its requests a trial and how they moved (the `prefix_cache` check judges its trials
    here too)."""
    n, fails = len(trials), sum(t.status == "failed" for t in trials)
    low, high = fail_interval(fails, n)
    check = ParityCheck(check=check, case_id=label, against=against, tolerance=tol,
                        status="passed", trials=trials if n > 1 else [], fails=fails,
                        fail_rate=fails / n, fail_low=low, fail_high=high, interval=INTERVAL,
                        max_fail_rate=max_fail_rate,
                        max_log_diff=max((t.max_log_diff or 0.0 for t in trials), default=0.0))
    failed = [t for t in trials if t.status == "failed"]
    check.moved = [line for t in failed for line in
                   ([f"trial {t.trial + 1}: {x}" for x in t.moved] if n > 1 else t.moved)][:SHOWN]
    errors = [t for t in trials if t.status == "error"]
    if errors:
        check.status = "error"
        check.error = f"trial {errors[0].trial + 1} of {n}: {errors[0].error}"
        return check
    rate = (f"{fails} of {n} {'trials' if n > 1 else 'trial'} failed ({fails / n:.0%}; "
            f"95% Clopper-Pearson interval {low:.0%} to {high:.0%}; max_fail_rate "
            f"{max_fail_rate:.0%})")
    if fails / n > max_fail_rate:
        worst = failed[0]
        check.status = "failed"
        check.error = (f"{rate}: in trial {worst.trial + 1}, {worst.moved_items} item(s) of "
                       f"{worst.moved_requests} of {requests} requests moved {moved_how}; "
                       f"largest: {worst.moved[0]}")
    elif fails:
        check.error = f"{rate}: within max_fail_rate"
    return check

"""`mibench ab`: the engines of two revisions measured in interleaved rounds.

For each engine group of the selected cases, round r measures both revisions, each in a
fresh worker whose `mibench.engines` comes from that revision's worktree
(harness/run/bootstrap.py) while the harness (timing loop, workloads) is the current one.
Where JAX runs on the CPU both workers are alive at once and their calls alternate
(ab/interleave.py, pacing `calls`); on a GPU or TPU the sides run one after the other, base
first in even rounds and new first in odd ones (pacing `sides`). A drift of the machine
falls on both sides of a round; the verdict (judge/paired.py) works on the rounds' paired
log ratios. Scores of the first round are compared as log scores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import os
import secrets
import shlex
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..case_kinds import kind_of
from ..config import CaseSpec, Config, expand
from ..config.bounds import check_flag
from ..config.matrix import select_cases
from ..host.provenance import collect, device_info
from ..judge.paired import paired_test
from ..judge.scores import SCORE_TOL, max_log_diff
from ..records import CaseRecord, Checkpoints
from ..records.ab import (
    ABCase,
    ABRecord,
    CostCheck,
    RoundSample,
    ScoresMoved,
    Side,
    Timing,
)
from ..records.compile import LibTpu
from ..run.heartbeat import still
from ..run.runner import run_in_worker
from ..run.worker import WorkerPool, probe_env
from ..stats.describe import round_log_ratio
from ..util import now
from ..verdicts import (
    COLD_START_REGRESSION,
    EXIT_CODES,
    NOT_COMPARED,
    PASS,
    REGRESSION,
    UNTESTED,
)
from .interleave import lockstep
from .revisions import Revision, checkout

JAX_CACHE, JAX_CACHE_MIN = "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"


def _sample(rec: CaseRecord, r: int, first: bool) -> RoundSample:
    return RoundSample(round=r, first=first, status=rec.status,
                       error=f"{rec.error.type}: {rec.error.message}" if rec.error else None,
                       compile_s=rec.compile_s, timed_s=rec.timed_s,
                       median_s=statistics.median(rec.timed_s) if rec.timed_s else None,
                       score_digest=rec.metrics.score_digest, load=rec.load)


def judge(case: ABCase, first_scores: dict, alpha: float, min_effect: float,
          interleaved: bool) -> None:
    """Fill the case's timing, scores and verdict from its rounds."""
    d = [x for b, n in zip(case.base, case.new, strict=False)
         if b.status == "ok" and n.status == "ok"
         and (x := round_log_ratio(b.timed_s, n.timed_s, interleaved)) is not None]
    test = paired_test(d, alpha, min_effect)
    case.timing = Timing(**test.as_dict(), round_log_ratios=d)
    base_ok = any(s.status == "ok" for s in case.base)
    new_failed = [s for s in case.new if s.status != "ok"]
    if first_scores.get("base") is not None and first_scores.get("new") is not None:
        found = max_log_diff(first_scores["base"], first_scores["new"])
        worst = found[0] if found is not None else None
        tol = SCORE_TOL.get(case.dtype, max(SCORE_TOL.values()))
        case.scores = ScoresMoved(max_log_diff=worst, tolerance=tol,
                                 moved=worst is None or worst > tol)
    if not base_ok:
        case.verdict, case.why = UNTESTED, "the base revision failed every round"
    elif new_failed and not any(s.status == "ok" for s in case.new):
        case.verdict, case.why = REGRESSION, f"the new revision fails: {new_failed[0].error}"
    elif case.scores is not None and case.scores.moved:
        diff = case.scores.max_log_diff
        case.verdict = REGRESSION
        case.why = (f"scores moved: max |log score diff| {diff:.3g} > {case.scores.tolerance:g}"
                    if diff is not None else "scores moved: different shape")
    else:
        case.verdict = test.verdict
        case.why = test.line()


@dataclasses.dataclass(frozen=True)
class ABOptions:
    """How an A/B run measures and judges: `rounds`; `case_glob` (globs on case ids, a
    union); `out` (the artifact's folder; None: not written); `argv` (for the provenance);
    the paired test's `alpha` and `min_effect` (None: judge/paired.py's); `interleave`
    (the sides' calls alternate within a round; None: where JAX runs on the CPU); `target`
    (a CompileTarget: also compile the JAX cases at both revisions for that TPU slice and
    gate their compiled cost, ab/costs.py, at `cost_threshold`)."""

    rounds: int = 5
    case_glob: list[str] | str | None = None
    out: Path | None = None
    argv: list[str] | None = None
    alpha: float | None = None
    min_effect: float | None = None
    interleave: bool | None = None
    target: object = None
    cost_threshold: float = 0.05


def run_ab(config: Config, repo: Path, base_rev: str, new_rev: str, cache: Path,
           options: ABOptions | None = None,
           note: Callable[[str], None] = lambda line: print(line, file=sys.stderr), **kw
           ) -> tuple[ABRecord, Path | None]:
    """Measure the selected cases of `config` at both revisions; returns the record and
    its artifact path (written after every engine group, atomically). `options`: an
    ABOptions, or its fields as keywords."""
    from ..judge import paired

    o = options or ABOptions(**kw)
    rounds, case_glob, out, argv, interleave = o.rounds, o.case_glob, o.out, o.argv, \
        o.interleave
    target, cost_threshold = o.target, o.cost_threshold
    alpha = paired.ALPHA if o.alpha is None else o.alpha
    min_effect = paired.MIN_EFFECT if o.min_effect is None else o.min_effect
    if rounds < 1:
        raise MibenchError(f"must be at least 1, got {rounds}", field="--rounds")
    check_flag(rounds, "--rounds")
    cases = select_cases(expand(config), case_glob)
    base, new = checkout(repo, base_rev, cache), checkout(repo, new_rev, cache)
    if interleave is None:
        interleave = device_info(probe_env()).platform == "cpu"
    record = new_record(f"ab-{base.commit[:8]}-{new.commit[:8]}", config, argv,
                        Side(**base.as_dict()), Side(**new.as_dict()), rounds, interleave)
    path = Path(out) / f"{record.run_id}.json" if out is not None else None
    saves = checkpoints(path, len(cases), argv)
    sides = {"base": base, "new": new}
    with compile_cache(cache):
        _measure(record, cases, sides, interleave, saves, alpha, min_effect, target,
                 cost_threshold, note)
        _vouch(record, config, cases, new, note)
    finish(record, saves)
    return record, path


def new_record(tag: str, config: Config, argv: list[str] | None, base: Side, new: Side,
               rounds: int, interleave: bool) -> ABRecord:
    """An A/B's record as it starts (`ab` of revisions, and of servers: harness/under_test/
    ab.py): its run id `TAG-STAMP-XXXX`, what it measures, and the sides' order in
    each round (base first in even rounds)."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return ABRecord(
        run_id=f"{tag}-{stamp}-{secrets.token_hex(2)}", started_at=now(),
        config=config.resolved(), config_sha256=config.sha256(), provenance=collect(argv),
        base=base, new=new, rounds=rounds, pacing="calls" if interleave else "sides",
        order=[["base", "new"] if r % 2 == 0 else ["new", "base"] for r in range(rounds)])


def finish(record: ABRecord, saves: Checkpoints | None) -> None:
    """An A/B's ending, whatever it measured: its overall verdict, its finish time, and
    its artifact saved a last time."""
    record.verdict = overall(record)
    record.finished_at = now()
    if saves is not None:
        saves.save(record, len(record.cases))


def _measure(record: ABRecord, cases: list[CaseSpec], sides: dict[str, Revision],
             interleave: bool, saves: Checkpoints | None, alpha: float, min_effect: float,
             target, cost_threshold: float, note: Callable[[str], None]) -> None:
    """Every engine group's rounds, judged; the artifact saved after each group."""
    costs = _compile(record, cases, target, sides, cost_threshold, note) if target else {}
    groups: dict[tuple, list[CaseSpec]] = {}
    for c in cases:
        groups.setdefault(c.engine_key, []).append(c)
    for group in groups.values():
        by_id = {c.case_id: ABCase(case_id=c.case_id, engine=c.engine, mode=c.mode,
                                   params=dict(c.params), model=c.model, dtype=c.dtype,
                                   tp=c.tp, workload=c.workload.as_dict()) for c in group}
        scores: dict[str, dict] = {c.case_id: {} for c in group}
        rounds = len(record.order)
        for r, order in enumerate(record.order):
            if interleave:
                _interleaved(group, sides, order, (r, rounds), by_id, scores, note)
                continue
            for position, name in enumerate(order):
                _round(group, sides[name], name, (r, rounds), position == 0, by_id, scores,
                       note)
        for c in group:
            judge(by_id[c.case_id], scores[c.case_id], alpha, min_effect, interleave)
            with_cost(by_id[c.case_id], costs.get(c.case_id))
            record.cases.append(by_id[c.case_id])
        if saves is not None:
            saves.save(record, len(record.cases))


@contextlib.contextmanager
def compile_cache(cache: Path):
    """The rounds' workers share a persistent JAX compilation cache under `cache` (unless
    one is set already): each program of each side compiles once, not once a round, which
    was most of a round's time on a CPU (the timed calls never compile: a compile there is
    `timed compiles`, and ab judges only the timed calls)."""
    if os.environ.get(JAX_CACHE):
        yield
        return
    saved = {k: os.environ.get(k) for k in (JAX_CACHE, JAX_CACHE_MIN)}
    os.environ[JAX_CACHE] = str(Path(cache) / "jax-compile")
    os.environ[JAX_CACHE_MIN] = "0"
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _vouch(record: ABRecord, config: Config, cases: list[CaseSpec], new: Revision,
           note: Callable[[str], None]) -> None:
    """2x or more faster cases: `suspicious improvement` unless the new revision's
    modes/engines parity passes for them (ab/vouch.py; nothing runs without one)."""
    from . import vouch

    fast = set(vouch.candidates(record.cases))
    if fast:
        checks = vouch.new_side_parity(config, [c for c in cases if c.case_id in fast],
                                       str(new.root), note)
        vouch.judge(record.cases, checks)


def checkpoints(path: Path | None, total: int, argv: list[str] | None) -> Checkpoints | None:
    """How an A/B artifact is saved as its cases finish (None: no --out); a write that
    fails mid-run is exit 4 naming the file and what it holds."""
    if path is None:
        return None
    again = shlex.join(["mibench", *map(str, argv[1:])]) if argv else "the same command"
    return Checkpoints(path, total, "case(s)", "free space (or raise the limit) and run "
                       f"the A/B again: {again}")


def _compile(record: ABRecord, cases: list[CaseSpec], target, sides: dict,
             threshold: float, note: Callable[[str], None]) -> dict:
    from ..compile import libtpu
    from .costs import compile_both

    lib = libtpu.find()
    record.compile_target = target
    record.libtpu = LibTpu(version=lib.version, path=str(lib.path), source=lib.source)
    return compile_both(cases, target, lib, sides, threshold, note)


def with_cost(case: ABCase, cost: CostCheck | None) -> None:
    """Add the case's compiled-cost check; a cost regression makes the case a regression."""
    case.cost = cost
    if cost is None or not cost.regressions:
        return
    case.why = cost.line() if case.verdict != REGRESSION else f"{case.why}; {cost.line()}"
    case.verdict = REGRESSION


def _record_sample(rec: CaseRecord, case: CaseSpec, side: Revision, name: str,
                   at: tuple[int, int], first: bool, by_id: dict, scores: dict,
                   note: Callable[[str], None]) -> None:
    """`at`: (this round from 0, the rounds in all)."""
    r, rounds = at
    sample = _sample(rec, r, first)
    getattr(by_id[case.case_id], name).append(sample)
    if scores[case.case_id].get(name) is None:  # the first round that scored
        scores[case.case_id][name] = rec.scores
    took = f"{sample.median_s * 1e3:.1f} ms" if sample.median_s else sample.error
    note(f"round {r + 1}/{rounds} {name} ({side.commit[:8]}) {case.case_id}: {took}")


def _round(group: list[CaseSpec], side: Revision, name: str, r: tuple[int, int], first: bool,
           by_id: dict, scores: dict, note: Callable[[str], None]) -> None:
    """One side of one round (`r`: this one from 0, the rounds in all): a fresh worker
    from the side's worktree runs the group."""
    pool = WorkerPool(engine_root=str(side.root))
    try:
        for case in group:
            with still(note, f"round {r[0] + 1}/{r[1]} {name} ({side.commit[:8]}) "
                             f"{case.case_id}"):
                rec = run_in_worker(case, pool, lambda dtype: None, lambda label: None)
            _record_sample(rec, case, side, name, r, first, by_id, scores, note)
    finally:
        pool.close()


def _interleaved(group: list[CaseSpec], sides: dict[str, Revision], order: list[str],
                 r: tuple[int, int], by_id: dict, scores: dict,
                 note: Callable[[str], None]) -> None:
    """One round (`r`: this one from 0, the rounds in all) with both sides' fresh workers
    alive, their calls alternating (interleave.lockstep); an http case (a server's load)
    runs its sides in turn."""
    pools = {name: WorkerPool(engine_root=str(sides[name].root)) for name in order}
    try:
        for case in group:
            with still(note, f"round {r[0] + 1}/{r[1]} {case.case_id}"):
                if not kind_of(case.engine).interleaved:
                    recs = {name: run_in_worker(case, pools[name], lambda dtype: None,
                                                lambda label: None) for name in order}
                else:
                    recs = lockstep(case, pools, order)
            for position, name in enumerate(order):
                _record_sample(recs[name], case, sides[name], name, r, position == 0, by_id,
                               scores, note)
    finally:
        for pool in pools.values():
            pool.close()


def case_verdict(case: ABCase) -> str:
    """The case's verdict word as `ab` shows and stores it (harness/verdicts.py; an older
    artifact's `no change` is translated when it is read, records/ab.py), what bisect
    judges a step by."""
    return case.verdict


def overall(record: ABRecord) -> str:
    """The run's outcome (harness/verdicts.py): regression, not compared or pass."""
    verdicts = [c.verdict for c in record.cases]
    if any(v in (REGRESSION, COLD_START_REGRESSION) for v in verdicts):
        return REGRESSION
    costs = any(c.cost is not None and c.cost.base.status == c.cost.new.status == "ok"
                for c in record.cases)
    if all(v == UNTESTED for v in verdicts) and not costs:
        return NOT_COMPARED
    return PASS


def exit_code(record: ABRecord) -> int:
    """0 pass, 1 a regression, 2 nothing could be compared."""
    return EXIT_CODES.get(record.verdict or "", 0)

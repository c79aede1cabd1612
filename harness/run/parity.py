"""Parity checks of a run, on a small parity workload (docs/parity.md).

Every score comparison judges **log scores**: the largest |ln a - ln b| over the two score
tables (`max_log_diff`). With `apply_softmax: false` scores are full-vocabulary
probabilities around 1e-5, so an absolute tolerance cannot tell plain from delimited
semantics, or items in the wrong order; a log difference is a relative one and can. The
absolute and relative differences are recorded too; the absolute one is also judged in
bfloat16 with `apply_softmax: true` (probabilities near 0.5, where it means something).

- `isolation`: item k (the middle one) is replaced by other tokens of the same length: no
  other item's score may change at all (tolerance 0, bitwise); then item k gets one more
  token: the others' log scores may move by at most 1e-5 (bfloat16: see `TOL`). Run for
  every case of the engines under test (not the reference engine's).
- `modes`: every case whose mode is not `single` against `single` of the same engine,
  model, dtype and tp: 1e-5 in float32.
- `engines`: `single` of each engine against the reference (`parity.reference`, torch
  `single` in float32 by default, tp 1): 1e-4 in float32; bfloat16's bound when either
  side is bfloat16.
- `topologies`: every case at tp > 1 against the same case (engine, mode, options, model,
  dtype) at tp 1: sharding must not change the scores, 1e-5 in float32.
- `concurrency`: every server of an http case (each launch and its arguments) scores the
  same requests alone and all in flight together mixed with others
  (harness/under_test/concurrency.py): each request's log scores must not move by more than the
  modes tolerance (1e-5 in float32). A server mibench launched is started afresh for the
  check, so the first request scored alone is the first it ever answers (a server whose
  first answers differ, a race at start-up, fails too). No reference needed; the record
  names what moved.
- `order`, `duplicates`, `degenerate`: scores that cannot silently go wrong, for every case
  of every engine and mode and for servers (harness/run/invariants.py): items permuted,
  an item repeated, items that all score the same or a query that changes nothing.
- `prefix_cache`: a server whose case says how to turn its cache off, cold against warm
  over fresh launches, beside the same server with its cache off (harness/under_test/
  prefix_cache.py).
- `speedup`: every case of a gated mode (`Mode.speedup_gated`: `packed`, any options)
  against its baseline mode's case (`Mode.speedup_baseline`: `single`) of the same
  engine, model, dtype, tp and workload (the default `single` when several): its median
  items/s over single's must be at least `parity.min_speedup` (3: mibench's own gate),
  at the `num_items` in `parity.speedup_items` (default every). A packed case with no such
  single case (none in the config, or it failed) records nothing: no pass is invented.

The parity workload is the config's (first matrix values, `parity.workload` patched over
it) cut down to at most 512 query tokens and 4 to 16 items, so parity stays cheap on big
workloads; small workloads (such as cpu-smoke's) are used unchanged; `tokens: constant`
(the seeds' identical items) becomes random, since identical items prove nothing. Only cases whose
status is `ok` are checked: a failed case already fails the run.

`speedup` is the exception: a speed needs the cases' own timed runs on their own workload
(a few ms of parity workload measure nothing), so it is judged on the case records the
runner already wrote (`metrics.throughput_items_per_s.median`), never on the parity
workload, and runs no engine.

The checks are `PARITY_CHECKS`, one registry; adding one: docs/design.md.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from mibench.registry import Registry
from mibench.workloads import Request, WorkloadSpec

from ..case_kinds import kind_of
from ..config.keys import EngineKey
from ..config.matrix import CaseSpec
from ..config.spec import Config
from ..records import CaseRecord, ParityCheck, ParityRecord
from . import invariants
from .labels import engine_label
from .pool import EnginePool, Scoring, make_call
from .speedup import speedup_checks
from .tolerances import ABS_TOL_SOFTMAX, TOL, tolerances  # noqa: F401

MAX_QUERY, MIN_ITEMS, MAX_ITEMS = 512, 4, 16


def parity_workload(config: Config) -> WorkloadSpec:
    w = config.workload.patched(config.parity.workload if config.parity else None)
    spec = w.expand()[0][1]
    if spec.requests is not None:
        return spec
    if spec.tokens == "constant":  # identical items prove nothing: parity keeps random ones
        spec = spec.replace(tokens="random")
    return spec.replace(query_tokens=min(spec.query_tokens, MAX_QUERY),
                        num_items=min(max(spec.num_items, MIN_ITEMS), MAX_ITEMS))


def cap(requests: list[Request]) -> list[Request]:
    """A JSONL workload's parity cut: its first request, query and items capped."""
    r = requests[0]
    return [Request(query=r.query[:MAX_QUERY], items=r.items[:MAX_ITEMS])]


@dataclasses.dataclass(frozen=True)
class Diff:
    """How two score tables differ: absolute (probabilities), relative, and log scores."""

    max_abs: float
    mean_abs: float
    max_rel: float
    max_log: float
    nan: int  # NaN scores (in either table): never a pass


def diff(a: list, b: list, skip: int | None = None) -> Diff:
    """The differences of two score tables (rows of `skip` left out). A score of 0 (an
    underflow) counts as the smallest float64, so a 0 against a 0 is equal and a 0
    against anything else is a log difference of hundreds, never an infinity."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"score shapes differ: {x.shape} vs {y.shape}")
    if skip is not None:
        x, y = np.delete(x, skip, axis=0), np.delete(y, skip, axis=0)
    nan = int(np.isnan(x).sum() + np.isnan(y).sum())
    x, y = np.nan_to_num(x, nan=0.0), np.nan_to_num(y, nan=0.0)
    d = np.abs(x - y)
    tiny = np.finfo(np.float64).tiny
    rel = d / np.maximum(np.abs(y), tiny)
    log = np.abs(np.log(np.maximum(x, tiny)) - np.log(np.maximum(y, tiny)))
    return Diff(max_abs=float(d.max(initial=0.0)), mean_abs=float(d.mean()) if d.size else 0.0,
                max_rel=float(rel.max(initial=0.0)), max_log=float(log.max(initial=0.0)),
                nan=nan)


def judge(check: str, case_id: str, against: str, d: Diff, tol: float,
          abs_tol: float | None = None, variant: str | None = None) -> ParityCheck:
    """The verdict of one comparison: log scores within `tol` (tol 0: bitwise equal) and,
    when given, probabilities within `abs_tol`; any NaN fails."""
    ok = d.max_log == 0.0 and d.max_abs == 0.0 if tol == 0.0 else d.max_log <= tol
    ok = ok and (abs_tol is None or d.max_abs <= abs_tol) and not d.nan
    return ParityCheck(check=check, variant=variant, case_id=case_id, against=against,
                       tolerance=tol, abs_tolerance=abs_tol, max_log_diff=d.max_log,
                       max_abs_diff=d.max_abs, mean_abs_diff=d.mean_abs, max_rel_diff=d.max_rel,
                       status="passed" if ok else "failed",
                       error=f"{d.nan} NaN scores" if d.nan else None)


@dataclasses.dataclass
class GroupParity:
    """Parity of the cases of one (model, dtype, tp) group; scores are memoized."""

    pool: EnginePool
    spec: WorkloadSpec
    reference: dict
    scores: dict = dataclasses.field(default_factory=dict)
    servers: object = None  # the run's ServerPool: fresh servers for `concurrency`
    settings: object = None  # the config's `parity` (its `speedup` gate), when it has one

    def requests(self, key: EngineKey) -> list[Request]:
        reqs = self.pool.requests(key, self.spec)
        return cap(reqs) if self.spec.requests is not None else reqs

    def score(self, key: EngineKey, mode: str, params: dict, requests=None, tag=""):
        memo = (key, mode, tuple(sorted((k, str(v)) for k, v in params.items())), tag)
        if memo not in self.scores:
            reqs = requests if requests is not None else self.requests(key)
            table = make_call(self.pool.get(key), reqs, Scoring(self.spec, mode, params))()
            self.scores[memo] = [row for req in table for row in req]
        return self.scores[memo]

    def compare(self, check: str, case: CaseSpec, against: str, dtype: str, left, right,
                variant: str | None = None, skip: int | None = None,
                tol: tuple[float, float | None] | None = None) -> ParityCheck:
        """`left()` against `right()` judged at the check's tolerances in `dtype` (`tol`:
        (log, absolute or None) given instead)."""
        tol, abs_tol = tol if tol is not None else tolerances(check, dtype,
                                                              self.spec.apply_softmax)
        if variant == "same_length":
            tol, abs_tol = 0.0, None
        try:
            d = diff(left(), right(), skip)
        except Exception as e:  # an engine error is a parity error, not a crash
            return ParityCheck(check=check, variant=variant, case_id=case.case_id,
                               against=against, tolerance=tol, abs_tolerance=abs_tol,
                               status="error", error=f"{type(e).__name__}: {e}")
        return judge(check, case.case_id, against, d, tol, abs_tol, variant)


def _mutated(requests: list[Request], delimiter: int | None, extra: int,
             vocab: int) -> list[Request]:
    """Item k = n // 2 of the first request replaced: same length (extra=0) or longer."""
    r = requests[0]
    k = len(r.items) // 2
    old = r.items[k]
    new = tuple((t + 1) % vocab if (t + 1) % vocab != delimiter else (t + 2) % vocab
                for t in old) + old[:1] * extra
    items = r.items[:k] + (new,) + r.items[k + 1:]
    return [Request(query=r.query, items=items)] + list(requests[1:])


def isolation(g: GroupParity, case: CaseSpec) -> list[ParityCheck]:
    if case.engine == g.reference["engine"]:  # the oracle is not under test
        return []
    key, reqs = case.engine_key, g.requests(case.engine_key)
    k = len(reqs[0].items) // 2
    vocab = g.pool.get(key).model_config.vocab_size
    base = lambda: g.score(key, case.mode, case.params)  # noqa: E731
    out = []
    for variant, extra in (("same_length", 0), ("changed_length", 1)):
        mutated = lambda extra=extra, v=variant: g.score(  # noqa: E731
            key, case.mode, case.params, _mutated(reqs, g.spec.delimiter, extra, vocab), v)
        out.append(g.compare("isolation", case, f"{case.case_id} with item {k} mutated",
                             case.dtype, mutated, base, variant=variant, skip=k))
    return out


def group_checks(g: GroupParity, cases: list[CaseSpec], checks: list[str],
                 records: list[CaseRecord] = ()) -> list[ParityCheck]:
    """The records of `checks` (names of PARITY_CHECKS) for one group: each case's, case by
    case, then the group's, in the registry's order."""
    chosen = [PARITY_CHECKS[name] for name in PARITY_CHECKS if name in checks]
    out: list[ParityCheck] = []
    for case in cases:
        for check in chosen:
            out += check.each_case(g, case) if check.each_case else []
    for check in chosen:
        out += check.group(g, list(cases), list(records)) if check.group else []
    return out


def _oracle(g: GroupParity, case: CaseSpec) -> bool:
    """Whether `case` is the reference itself (`parity.reference`'s engine, mode and dtype,
    default options): `order` and `duplicates` leave it out, as isolation leaves out the
    reference engine (the job `score-checks` and the tests check it)."""
    ref = g.reference
    return (case.engine, case.mode, case.dtype) == (ref["engine"], ref["mode"],
                                                    ref["dtype"]) and not case.params


def _modes(g: GroupParity, case: CaseSpec) -> list[ParityCheck]:
    if case.mode == "single":
        return []
    return [g.compare("modes", case, f"{case.engine}/single", case.dtype,
                      lambda: g.score(case.engine_key, case.mode, case.params),
                      lambda: g.score(case.engine_key, "single", {}))]


def _topologies(g: GroupParity, case: CaseSpec) -> list[ParityCheck]:
    if case.tp == 1:
        return []
    tp1 = case.engine_key.at_tp1()
    return [g.compare("topologies", case, case.id_at(tp1), case.dtype,
                      lambda: g.score(case.engine_key, case.mode, case.params),
                      lambda: g.score(tp1, case.mode, case.params))]


def _engines(g: GroupParity, cases: list[CaseSpec], records) -> list[ParityCheck]:
    ref, out = g.reference, []
    for case in one_per_engine(c for c in cases if c.engine != ref["engine"]):
        ref_key = EngineKey(ref["engine"], case.model, ref["dtype"], 1)
        out.append(g.compare(
            "engines", dataclasses.replace(case, case_id=engine_label(case)),
            f"{ref['engine']}/{ref['mode']}/{ref['dtype']}", _coarser(case.dtype, ref["dtype"]),
            lambda c=case: g.score(c.engine_key, "single", {}),
            lambda k=ref_key: g.score(k, ref["mode"], {})))
    return out


def _or_error(g: GroupParity, case: CaseSpec, check: str, run, many: bool = False,
              variant: str | None = None):
    """`run()`, or the check's `error` record when making its requests raised (an engine
    that cannot load: a parity error, not a crash)."""
    try:
        return run()
    except Exception as e:
        err = ParityCheck(check=check, variant=variant, case_id=case.case_id,
                          against="-", tolerance=0.0, status="error",
                          error=f"{type(e).__name__}: {e}")
        return [err] if many else err


def degenerate_records(g: GroupParity, cases: list[CaseSpec],
                       records: list[CaseRecord]) -> list[ParityCheck]:
    """`degenerate` (scores) of every case record of the group: its own scores on its own
    workload; a case that failed for invalid scores fails it too."""
    specs = {c.case_id: c for c in cases}
    out = []
    for rec in records:
        case = specs.get(rec.case_id)
        if rec.error is not None and rec.error.type == "InvalidScores":  # failed for it
            out.append(invariants.case_scores(rec, None, None, rec.model.dtype))
        if case is None or rec.status != "ok":
            continue
        try:
            reqs = g.pool.requests(case.engine_key, case.workload)
        except Exception:  # noqa: BLE001 - the check says it could not judge
            reqs = None
        out.append(invariants.case_scores(rec, reqs, case.workload, case.dtype))
    return out


def one_per_engine(cases) -> list[CaseSpec]:
    """The first case of each distinct engine; for http, of each server (its address or
    its launch with arguments), whatever the requests' served name or timeout."""
    seen: dict[tuple, CaseSpec] = {}
    for case in cases:
        ref = kind_of(case.engine).server(case)
        server = () if ref is None else (ref.base_url, ref.launch)
        seen.setdefault((case.engine, case.model, case.dtype, case.tp, *server), case)
    return list(seen.values())


def _coarser(a: str, b: str) -> str:
    """The dtype whose tolerance judges a comparison of an `a` and a `b` table."""
    return "bfloat16" if "bfloat16" in (a, b) else "float32"


@dataclasses.dataclass(frozen=True)
class Check:
    """One parity check (docs/parity.md): what it runs for each case of a group, and what
    it runs once for the group (its case records at hand); each returns its records."""

    each_case: Callable[[GroupParity, CaseSpec], list[ParityCheck]] | None = None
    group: Callable[[GroupParity, list[CaseSpec], list[CaseRecord]],
                    list[ParityCheck]] | None = None


def _invariant(name: str, run, many: bool = False, variant: str | None = None,
               oracle_too: bool = False) -> Callable:
    """A case's invariant check (run/invariants.py), an `error` record when it raised."""
    def each_case(g: GroupParity, case: CaseSpec) -> list[ParityCheck]:
        if not oracle_too and _oracle(g, case):
            return []
        out = _or_error(g, case, name, lambda: run(g, case), many, variant)
        return out if many else [out]
    return each_case


def _kinds_check(name: str) -> Callable:
    """A check the case kinds run on their own cases (`CaseKind.parity`: the servers'
    `concurrency` and `prefix_cache`, harness/under_test/parity_checks.py)."""
    def group(g: GroupParity, cases: list[CaseSpec], records) -> list[ParityCheck]:
        out: list[ParityCheck] = []
        for kind in dict.fromkeys(kind_of(c.engine) for c in cases):
            out += kind.parity(g, [c for c in cases if kind_of(c.engine) is kind], [name])
        return out
    return group


# the checks a config names in `parity.checks` (records/run.py CHECKS: the schema's names),
# in the order their records are written: each case's in turn, then the group's
PARITY_CHECKS: Registry[Check] = Registry("parity check", field="parity.checks")
PARITY_CHECKS.add("isolation", Check(each_case=isolation))
PARITY_CHECKS.add("order", Check(each_case=_invariant("order", invariants.order)))
PARITY_CHECKS.add("duplicates", Check(each_case=_invariant(
    "duplicates", invariants.duplicates, many=True)))
PARITY_CHECKS.add("engines", Check(group=_engines))
PARITY_CHECKS.add("concurrency", Check(group=_kinds_check("concurrency")))
PARITY_CHECKS.add("prefix_cache", Check(group=_kinds_check("prefix_cache")))
PARITY_CHECKS.add("degenerate", Check(  # the query (each case), then every case's scores
    each_case=_invariant("degenerate", lambda g, case: invariants.query_moves(
        g, case, g.pool.get(case.engine_key).model_config.vocab_size), variant="query",
        oracle_too=True),
    group=degenerate_records))
PARITY_CHECKS.add("modes", Check(each_case=_modes))
PARITY_CHECKS.add("topologies", Check(each_case=_topologies))
PARITY_CHECKS.add("speedup", Check(group=lambda g, cases, records: speedup_checks(
    records, g.settings.min_speedup, g.settings.speedup_items)))


def reference_keys(config: Config, cases: list[CaseSpec]) -> set[EngineKey]:
    """Engines parity will need beyond the cases' own: the reference, and the tp 1
    engine of every case that the `topologies` check compares with it."""
    checks = config.parity.checks if config.parity is not None else []
    ref = config.parity.reference if config.parity is not None else None
    keys = ({EngineKey(ref.engine, c.model, ref.dtype, 1) for c in cases}
            if "engines" in checks else set())
    if "topologies" in checks:
        keys |= {c.engine_key.at_tp1() for c in cases if c.tp > 1}
    return keys


def new_record(config: Config) -> ParityRecord:
    return ParityRecord(reference=config.parity.reference.model_dump(),
                        workload=parity_workload(config).as_dict(), passed=True)


def check_group(config: Config, pool: EnginePool, cases: list[CaseSpec],
                record: ParityRecord, case_records: list[CaseRecord] = (),
                servers=None) -> None:
    """Run the config's checks for one group's ok cases, appending to `record`;
    `speedup` and `degenerate` read the group's `case_records` (a case that failed for
    invalid scores fails `degenerate`); `concurrency` and `prefix_cache` start fresh
    servers from `servers` (the run's ServerPool)."""
    p = config.parity
    g = GroupParity(pool, parity_workload(config), p.reference.model_dump(), servers=servers,
                    settings=p)
    record.checks += group_checks(g, cases, list(p.checks), list(case_records))
    record.passed = all(c.passing for c in record.checks)

"""`mibench ab BASE NEW CONFIG --server-repo PATH` (or `--base-python/--new-python`): two
versions of a server under test, judged like two revisions of the engines.

A side is a way to launch the config's servers: a revision of the server's git repository
(checked out once into a cached worktree, `$MIBENCH_CACHE/server-worktrees/<sha>`, whose
`launch.repo_path` folder goes first on PYTHONPATH, so both revisions share one
environment's dependencies: a full sglang-jax environment is about 2 GB), or another
interpreter. Only the config's launched http cases are measured.

Where the servers run on the CPU, both sides' servers are up for the whole A/B (a start
costs 20-60 s for sglang-jax) and each round sends the case's requests one at a time,
alternating between them (base then new for even requests of even rounds, the other way
round otherwise), so a load that comes and goes falls on both. On a GPU or TPU a server
owns the device: each round starts one side's server, sends its requests, stops it, then
the other's. A round's log ratio is the median over requests of ln(new / base) latency;
the verdict is the paired test of the rounds (judge/paired.py), as for the engines. The
first round's scores of every request are compared as log scores: scores that move are a
regression. The case's `clients`/`rate` load shape is not used: a paired comparison needs
each request sent to both sides under the same conditions.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..ab import vouch
from ..ab.revisions import resolve, worktree
from ..ab.rounds import checkpoints, finish, judge, new_record
from ..config import CaseSpec, Config, expand
from ..config.bounds import check_flag
from ..config.matrix import select_cases
from ..host.provenance import device_info
from ..records.ab import ABCase, ABRecord, RoundSample, Side
from ..run.worker import probe_env
from ..util import git
from . import metrics as server_metrics
from .feed import Bodies
from .launch import ServerFailed
from .pool import ServerPool

Note = Callable[[str], None]


@dataclasses.dataclass(frozen=True)
class ServerSide:
    """One side: its label, commit and subject (a revision), and how its servers launch:
    another interpreter, or a revision's worktree first on PYTHONPATH."""

    rev: str
    commit: str
    subject: str
    python: str | None = None
    worktree: Path | None = None

    def pool(self, log_dir: Path, name: str, repo_path: str | None) -> ServerPool:
        env, source = None, None
        if self.worktree is not None:
            source = str(self.worktree / (repo_path or ""))
            env = {"PYTHONPATH": source}
        return ServerPool(log_dir, python=self.python, env=env, label=f"{name}-",
                          source=source)


def revision_side(repo: Path, rev: str, cache: Path) -> ServerSide:
    """`rev` of the server repository in its cached worktree."""
    commit = resolve(repo, rev)
    root = worktree(repo, commit, cache, folder="server-worktrees")
    return ServerSide(rev=rev, commit=commit, worktree=root,
                      subject=git(repo, "log", "-1", "--format=%s", commit))


def python_side(label: str, python: str) -> ServerSide:
    if not Path(python).is_file():
        raise MibenchError(f"{python} is not a file (give the server's interpreter)",
                           field=f"--{label}-python")
    return ServerSide(rev=label, commit="", subject=f"interpreter {python}", python=python)


def launched_cases(config: Config, case_globs) -> list[CaseSpec]:
    cases = [c for c in select_cases(expand(config), case_globs)
             if c.http is not None and c.http.launch is not None]
    if not cases:
        raise MibenchError("has no http case with a launch section among the selected cases: "
                           "an A/B of server versions launches the config's servers",
                           field="--server-repo")
    return cases


def run_server_ab(config: Config, sides: dict[str, ServerSide], *, rounds: int = 5,
                  case_globs=None, out: Path | None = None, argv: list[str] | None = None,
                  interleave: bool | None = None, min_effect: float | None = None,
                  note: Note = lambda line: print(line, file=sys.stderr)
                  ) -> tuple[ABRecord, Path | None]:
    """Measure the launched http cases with both sides' servers; the record and its
    artifact path (written after every case). `min_effect`: the paired test's (None:
    judge/paired.py's), the threshold of a nightly or bisect that runs it."""
    from ..judge import paired

    effect = paired.MIN_EFFECT if min_effect is None else min_effect

    if rounds < 1:
        raise MibenchError(f"must be at least 1, got {rounds}", field="--rounds")
    check_flag(rounds, "--rounds")
    cases = launched_cases(config, case_globs)
    if interleave is None:
        interleave = device_info(probe_env()).platform == "cpu"
    base, new = sides["base"], sides["new"]
    record = new_record(f"ab-server-{base.commit[:8] or base.rev}-{new.commit[:8] or new.rev}",
                        config, argv, Side(rev=base.rev, commit=base.commit,
                                           subject=base.subject),
                        Side(rev=new.rev, commit=new.commit, subject=new.subject), rounds,
                        interleave)
    path = Path(out) / f"{record.run_id}.json" if out is not None else None
    saves = checkpoints(path, len(cases), argv)
    logs = (Path(out) if out is not None else Path(".")) / f"{record.run_id}.servers"
    repo_path = cases[0].http.launch.repo_path
    pools = {name: side.pool(logs, name, repo_path) for name, side in sides.items()}
    try:
        for case in cases:
            ab_case = ABCase(case_id=case.case_id, engine=case.engine, mode=case.mode,
                             params=dict(case.params), model=case.model, dtype=case.dtype,
                             tp=case.tp, workload=case.workload.as_dict())
            if case.http.slo is not None:  # capacity: under_test/metrics.py
                _capacity(case, pools, record.order, ab_case, effect, note)
            else:
                scores = _measure(case, pools, record.order, interleave, ab_case, note)
                judge(ab_case, scores, paired.ALPHA, effect, interleaved=True)
            if case.http.cold_starts:
                server_metrics.cold_rounds(case, pools, record.order, ab_case, paired.ALPHA,
                                           effect, note)
            ab_case.servers = {name: pools[name].info(case.engine_key) for name in pools
                               if pools[name].info(case.engine_key) is not None}
            record.cases.append(ab_case)
            if saves is not None:
                saves.save(record, len(record.cases))
            for pool in pools.values():
                pool.release({c.engine_key for c in cases[cases.index(case) + 1:]})
    finally:
        for pool in pools.values():
            pool.close()
    vouch.judge(record.cases, [])  # no parity of servers here: 2x or more is suspicious
    finish(record, saves)
    return record, path


class _Side:
    """One side's server for a case: its address, its requests' bodies, what came back."""

    def __init__(self, case: CaseSpec, pool: ServerPool):
        from mibench.engines import HttpClient, load_engine

        self.case, self.pool = case, pool
        key = pool.bind(case.engine_key)
        self.engine = load_engine("http", **key.load_kwargs())
        self.bodies = Bodies(case, self.engine)  # request i's body, built when sent
        self.url = key.base_url
        self.client = HttpClient(self.url, case.http.timeout_s)

    def send(self, i: int) -> tuple[float, list[list[float]] | None, str | None]:
        """Request i: (latency s, scores or None, the failure or None)."""
        b = self.bodies
        built = b.at(i)
        t0 = time.perf_counter()
        reply = b.wire.send(self.client, built.body)
        latency = time.perf_counter() - t0
        if not reply.ok:
            return latency, None, f"{reply.status}: {reply.text(300)}"
        try:
            return latency, b.wire.decode(reply, built.items, b.labels, b.softmax,
                                          b.dtype), None
        except ValueError as e:
            return latency, None, f"invalid: {e}"

    def close(self) -> None:
        self.client.close()


def _side(case: CaseSpec, pool: ServerPool, failed: dict[str, str], name: str):
    """A side's server for `case`, or None with why it did not start in `failed[name]`
    (a server that cannot start is that side failing, not bad input)."""
    try:
        return _Side(case, pool)
    except ServerFailed as e:
        failed[name] = f"the server did not start: {e}"
        return None


def _capacity(case: CaseSpec, pools: dict[str, ServerPool], order: list[list[str]],
              ab_case: ABCase, effect: float, note: Note) -> None:
    """Both sides' servers up; their capacities measured in rounds (under_test/metrics.py).
    A side whose server does not start fails its rounds (judged as in `_measure`)."""
    from ..judge import paired

    failed: dict[str, str] = {}
    sides = {name: _side(case, pool, failed, name) for name, pool in pools.items()}
    try:
        if not failed:
            server_metrics.capacity_rounds(case, sides, order, ab_case, paired.ALPHA,
                                           effect, note)
            return
        for r, names in enumerate(order):
            for position, name in enumerate(names):
                getattr(ab_case, name).append(RoundSample(
                    round=r, first=position == 0, status="failed" if name in failed else "ok",
                    error=failed.get(name)))
        judge(ab_case, {}, paired.ALPHA, effect, interleaved=True)
    finally:
        for side in sides.values():
            if side is not None:
                side.close()


def _measure(case: CaseSpec, pools: dict[str, ServerPool], order: list[list[str]],
             interleave: bool, ab_case: ABCase, note: Note) -> dict:
    """Every round of one case; returns each side's first-round scores (all requests). A
    side whose server does not start fails its rounds (ab/rounds.judge: a new side that
    fails is a regression, a base side that fails leaves the case untested)."""
    plan = case.http
    n, warm = plan.requests, plan.warmup_requests
    scores: dict[str, list | None] = {}
    failed: dict[str, str] = {}
    sides = {name: _side(case, pool, failed, name) for name, pool in pools.items()} \
        if interleave else {}
    try:
        for r, names in enumerate(order):
            times, results = {}, {}
            if not interleave or failed:  # one side at a time
                for name in names:
                    side = sides.get(name) if interleave else _side(case, pools[name],
                                                                     failed, name)
                    if side is None:
                        continue
                    if not interleave or r == 0:
                        for i in range(warm):
                            side.send(i)
                    times[name], results[name] = _requests(side, range(warm, warm + n))
                    if not interleave:
                        side.close()
                        pools[name].close()
            else:
                if r == 0:
                    for side in sides.values():
                        for i in range(warm):
                            side.send(i)
                times = {name: [] for name in names}
                results = {name: [] for name in names}
                for k, i in enumerate(range(warm, warm + n)):
                    for name in (names if k % 2 == 0 else names[::-1]):
                        latency, got, error = sides[name].send(i)
                        times[name].append(latency)
                        results[name].append((got, error))
            for position, name in enumerate(names):
                if name not in times:
                    sample = RoundSample(round=r, first=position == 0, status="failed",
                                         error=failed.get(name, "not measured"))
                else:
                    sample = _sample(r, position == 0, times[name], results[name])
                getattr(ab_case, name).append(sample)
                if r == 0 and name in results:  # per request, one row per item
                    tables = [got for got, _ in results[name]]
                    scores[name] = tables if all(t is not None for t in tables) else None
                took = f"{sample.median_s * 1e3:.1f} ms" if sample.median_s else sample.error
                note(f"round {r + 1}/{len(order)} {name} {case.case_id}: {took}")
    finally:
        for side in sides.values():
            if side is not None:
                side.close()
    return scores


def _requests(side: _Side, indices) -> tuple[list[float], list]:
    times, results = [], []
    for i in indices:
        latency, got, error = side.send(i)
        times.append(latency)
        results.append((got, error))
    return times, results


def _sample(r: int, first: bool, times: list[float], results: list) -> RoundSample:
    import statistics

    errors = [e for _, e in results if e is not None]
    ok = not errors
    return RoundSample(round=r, first=first, status="ok" if ok else "failed",
                       error=f"{len(errors)} of {len(results)} requests failed; first: "
                       f"{errors[0]}" if errors else None,
                       timed_s=times if ok else [],
                       median_s=statistics.median(times) if ok and times else None)

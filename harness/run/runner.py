"""Run every case of a plan and keep every measurement: `run(plan) -> RunRecord` (the plan:
harness/run/plan.py).

Neither prints (except the progress bar on a terminal) nor exits. The artifact is rewritten
atomically after every case and every parity group, so an interrupted or killed run keeps
all finished cases; `resume=ARTIFACT` re-runs only the missing or failed cases of the same
config (same sha256) into the same file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
import sys
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError, Unavailable

from ..case_kinds import kind_of, open_servers
from ..config.cases import CaseSpec
from ..config.references import load_references
from ..config.spec import Config
from ..host.children import WorkerDied
from ..host.peak import PeakTable
from ..host.provenance import collect, device_info, git_info
from ..judge.comparable import defect
from ..records import (
    CaseRecord,
    ErrorInfo,
    Invocation,
    RunRecord,
    locked,
    read_artifact,
    write_artifact,
    write_failed,
)
from ..util import now
from . import parity, stopped
from .case import failed_record, metrics_of, run_case, skipped_record
from .plan import Plan, group_of
from .pool import EngineKey, EnginePool
from .progress import make_progress
from .stopped import RunInterrupted
from .worker import WorkerPool, probe_env


def artifact_path(record: RunRecord, out_dir: str | Path) -> Path:
    return Path(out_dir) / f"{record.run_id}.json"


def new_record(plan: Plan, env: dict | None = None) -> RunRecord:
    config, options = plan.config, plan.options
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    devices = device_info(env) if env is not None else None
    provenance = collect(list(options.argv) or None, options.engine_repo, devices)
    provenance.invocation = invocation(plan)
    references = load_references(config.references) if config.references else None
    return RunRecord(run_id=f"{config.name}-{stamp}-{secrets.token_hex(2)}", started_at=now(),
                     config=config.resolved(), config_sha256=config.sha256(),
                     provenance=provenance, references=references)


def invocation(plan: Plan) -> Invocation | None:
    """How `mibench run` was asked for this run, when it came from a config file: what a
    report's reproduce commands start from."""
    if plan.config_path is None:
        return None
    coordinator, processes, process_id = plan.options.distributed
    extra = [w for flag, value in (("--coordinator", coordinator),
                                   ("--num-processes", processes),
                                   ("--process-id", process_id)) if value is not None
             for w in (flag, str(value))]
    return Invocation(config=plan.config_path, sets=list(plan.options.sets), options=extra)


def resume_record(config: Config, path: Path, allow_mixed: bool = False) -> RunRecord:
    """The record of the artifact at `path` to go on with: only its ok cases, unfinished
    again; one that no run of this config wrote (another config, a `defect`, another
    commit without `allow_mixed`) is a MibenchError naming `--resume`."""
    record = read_artifact(path)
    why = defect(record)
    if why:
        raise MibenchError(f"invalid artifact: {why}", field=f"--resume {path}")
    if record.config_sha256 != config.sha256():
        raise MibenchError(f"was written by a different config (sha256 {record.config_sha256[:12]}"
                           f" vs {config.sha256()[:12]}); resume only with the same config and "
                           "--set overrides, or start a new run", field=f"--resume {path}")
    was, now_git = record.provenance.git, git_info(Path.cwd())
    why = (f"was measured at commit {str(was.commit)[:12]} and this checkout is at "
           f"{str(now_git.commit)[:12]}" if was.commit != now_git.commit else
           "was measured with uncommitted changes" if was.dirty else
           "would be continued with uncommitted changes" if now_git.dirty else None)
    if why and not allow_mixed:
        raise MibenchError(f"{why}: its cases would not be one code version; commit and "
                           "start a new run, or pass --allow-mixed (the report then shows "
                           "each case's commit)", field=f"--resume {path}")
    record.cases = [c for c in record.cases if c.status == "ok"]
    record.resumed_at.append(now())
    record.finished_at = None
    record.parity = None
    return record


def run_in_worker(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
                  tick: Callable[[str], None]) -> CaseRecord:
    """Measure one case in its engine's worker process, or with `runs.processes` = N in N
    fresh workers one after another (stopping at the first that fails). A pool with
    `fresh_per_case` (a GPU or TPU) gives each JAX case a worker of its own, so its device
    peak is its own (harness/host/memory.py)."""
    records = []
    for k in range(case.runs.processes):
        pool.fresh(case.engine_key, force=k > 0)
        records.append(_in_one_worker(case, pool, peak, tick))
        if records[-1].status != "ok":
            return records[-1]
    return records[0] if len(records) == 1 else pooled(case, records, pool, peak)


def pooled(case: CaseSpec, records: list[CaseRecord], pool: EnginePool,
           peak: Callable[[str], float | None]) -> CaseRecord:
    """One record of a case measured in several processes: every process's timed runs,
    the metrics over all of them, the first compile time and the highest memory peak. A
    process whose scores differ from the first's fails the case (nondeterminism)."""
    rec = records[0].model_copy(deep=True)
    rec.process_timed_s = [r.timed_s for r in records]
    rec.timed_s = [t for r in records for t in r.timed_s]
    rec.warmup_s = [t for r in records for t in r.warmup_s]
    engine = pool.get(case.engine_key)
    requests = pool.requests(case.engine_key, case.workload)
    metrics = metrics_of(case, engine, requests, rec.timed_s, peak)
    metrics.score_digest = rec.metrics.score_digest
    highest = max(records, key=lambda r: r.metrics.peak_memory_bytes or 0).metrics
    metrics.peak_memory_bytes = highest.peak_memory_bytes
    metrics.peak_memory_source = highest.peak_memory_source
    metrics.peak_rss_rise_bytes = max((r.metrics.peak_rss_rise_bytes or 0) for r in records)
    metrics.first_call_compiles = rec.metrics.first_call_compiles
    metrics.warmup_compiles = _total(r.metrics.warmup_compiles for r in records)
    metrics.timed_compiles = _total(r.metrics.timed_compiles for r in records)
    rec.metrics = metrics
    digests = {r.metrics.score_digest for r in records}
    if len(digests) > 1:
        rec.status = "failed"
        rec.error = ErrorInfo(type="Nondeterminism", message=f"the {len(records)} processes "
                              f"scored differently (score digests {sorted(digests)})",
                              traceback="")
    return rec


def _total(counts) -> int | None:
    """The sum of the counts that were counted (None when none was)."""
    counted = [n for n in counts if n is not None]
    return sum(counted) if counted else None


def _in_one_worker(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
                   tick: Callable[[str], None]) -> CaseRecord:
    """A worker that dies, passes `runs.max_rss` or hangs makes the case `failed` with the
    cause; the next case of that engine starts a fresh worker."""
    try:
        engine = pool.get(case.engine_key)
        return engine.run_case(case, peak(case.dtype), tick)
    except Unavailable as e:
        rec = skipped_record(case, e)
    except Exception as e:
        rec = failed_record(case, e)
        if isinstance(e, WorkerDied):
            pool.discard(case.engine_key)
    return rec


class RunState:
    """What a run has so far: its plan, the finished records, the engines, the artifact."""

    def __init__(self, plan: Plan, record: RunRecord, path: Path, pool: EnginePool,
                 servers, peak: PeakTable, progress):
        self.plan, self.config, self.record, self.path = plan, plan.config, record, path
        self.pool, self.servers, self.peak, self.progress = pool, servers, peak, progress
        self.cases = list(plan.cases)
        self.done: dict[str, CaseRecord] = {c.case_id: c for c in record.cases}
        self.groups = plan.groups
        self.measured: list[str] = []  # the cases this run measured, in order
        self.saved: list[str] | None = None  # what the artifact holds, once this run wrote it

    def save(self) -> None:
        """The artifact with every finished case, in the config's order (a --case run
        keeps the others' records). A write that fails (a full disk, a file-size limit,
        permissions) leaves the last one in place and is an EnvironmentFailed (exit 4)
        saying what it holds and how to go on."""
        order = [c.case_id for c in self.plan.all_cases]
        self.record.cases = [self.done[i] for i in order if i in self.done]
        self.record.provenance.devices.peak_flops = dict(self.peak.values)
        self.record.provenance.devices.peak_source = self.peak.source
        if self.plan.writer:
            try:
                write_artifact(self.record, self.path)
            except OSError as e:
                raise write_failed(e, self.path, *self.after_failed_write()) from None
            self.saved = [c.case_id for c in self.record.cases]

    def after_failed_write(self) -> tuple[str, str]:
        return stopped.after_failed_write(self.plan, self.path, self.saved, self.measured)

    def held_after_interrupt(self) -> str:
        return stopped.held_after_interrupt(self.plan, self.path, self.saved, self.record.cases)

    def keep_interrupted(self, case: CaseSpec, here) -> None:
        """After an interruption mid-case: the record of what the case measured before it
        (a worker's, when it sends one in time), saved; a second Ctrl-C skips the wait."""
        if not (self.plan.writer and self.plan.workers):  # in-process: it ended with it
            return
        print("interrupted: keeping what the running case measured (Ctrl-C again to "
              "skip)", file=sys.stderr, flush=True)
        try:
            rec = self.pool.interrupted(case.engine_key)
        except Exception as e:  # the interruption goes on without it
            print(f"interrupted: the running case's record could not be read ({e})",
                  file=sys.stderr)
            return
        if rec is not None:
            self.keep(case, rec, here)

    def keep(self, case: CaseSpec, rec: CaseRecord, here, finished: bool = False) -> None:
        """A case's record, stamped with the checkout and its server, into the artifact
        (saved); `finished`: its kind's work after it first (a load case's cold starts)."""
        rec.commit, rec.dirty = here.commit, here.dirty
        rec.server = self.servers.info(case.engine_key)
        if finished:
            kind_of(case.engine).after(case, rec, self.servers)
        self.done[case.case_id] = rec
        self.measured.append(case.case_id)
        self.save()

    def needed_after(self, i: int, group_done: bool) -> set[EngineKey]:
        """Engines that later cases, or the parity of the unfinished group, still need."""
        later = self.cases[i + 1:]
        keys = {c.engine_key for c in later} | parity.reference_keys(self.config, later)
        if self.parity_checks and not group_done:
            group = self.groups[group_of(self.cases[i])]
            keys |= {c.engine_key for c in group} | parity.reference_keys(self.config, group)
        return keys

    @property
    def parity_checks(self) -> list[str]:
        return list(self.config.parity.checks) if self.config.parity else []

    def finish_group(self, case: CaseSpec) -> None:
        """After a group's last case: its parity checks (artifact saved after them)."""
        group = self.groups[group_of(case)]
        if self.parity_checks:
            if self.record.parity is None:
                self.record.parity = parity.new_record(self.config)
            ok = [c for c in group if self.done[c.case_id].status == "ok"]
            self.progress.note(f"parity {group_of(case)}")
            parity.check_group(self.config, self.pool, ok, self.record.parity,
                               [self.done[c.case_id] for c in group], self.servers)
            self.save()


def run(plan: Plan) -> RunRecord:
    """Run every case of the plan (or, resuming, every missing or failed one) and the
    parity checks; returns the final record. The artifact is `out/<run_id>.json`, or the
    resumed file. In a multi-process run every process runs every case (the mesh spans all
    processes' devices) and only the writer (process 0) writes the artifact. Measured in
    worker processes (harness/run/worker.py) unless the plan says in-process."""
    options = plan.options
    with contextlib.ExitStack() as stack:  # the artifact's lock, held to the end
        if options.resume:
            path = Path(options.resume)
            if plan.writer and path.is_file():  # locked before it is read: two resumes
                stack.enter_context(locked(path))  # of one file never both read it
            record = resume_record(plan.config, path, options.allow_mixed)
            _before_cases(plan, {c.case_id for c in record.cases})
        else:
            _before_cases(plan, set())  # before the devices are probed: a worker's start
            record = new_record(plan, probe_env() if plan.workers else None)
            path = artifact_path(record, options.out)
            if plan.writer:
                stack.enter_context(locked(path))
        return _run_record(plan, record, path)


def _before_cases(plan: Plan, finished: set[str]) -> None:
    """Tell the plan's `before_cases` the cases still to run (the writer only)."""
    if plan.before_cases is not None and plan.writer:
        plan.before_cases([c for c in plan.cases if c.case_id not in finished])


def _run_record(plan: Plan, record: RunRecord, path: Path) -> RunRecord:
    """`run` with its record (new, or resumed) and the artifact's lock held."""
    options = plan.options
    devices = record.provenance.devices
    peak = plan.peak
    if peak is None:
        peak = PeakTable(devices.platform, devices.kind)
        peak.values.update(devices.peak_flops)  # a resumed run keeps its measured peak
        peak.kept = devices.peak_source
    finished = {c.case_id for c in record.cases}
    todo = [c for c in plan.cases if c.case_id not in finished]
    runs = sum(c.runs.processes * (1 + c.runs.warmup + c.runs.timed) for c in todo)
    if not plan.workers and any(c.runs.processes > 1 for c in todo):
        raise MibenchError("needs worker processes, and this run scores in-process (a "
                           "multi-process run)", field="runs.processes")
    # on a GPU or TPU one JAX worker at a time owns the device (a TPU opens in one process),
    # and each JAX case gets a fresh one: JAX's device peak only grows over a process
    accelerator = devices.platform not in (None, "cpu")
    fresh = accelerator if plan.fresh_workers is None else plan.fresh_workers
    servers = open_servers(path.with_name(path.stem + ".servers"), artifact_dir=path.parent)
    pool = (WorkerPool(plan.engine_factory, engine_root=plan.engine_root,
                       exclusive=accelerator, bind=servers.bind, fresh_per_case=fresh)
            if plan.workers else EnginePool(plan.engine_factory, bind=servers.bind))
    measure_case = run_in_worker if plan.workers else run_case
    state = RunState(plan, record, path, pool, servers, peak,
                     make_progress(options.progress if plan.writer else "none", runs))
    try:
        _run_cases(state, todo, measure_case, git_info(Path.cwd()))
        record.finished_at = now()
        state.save()
    except KeyboardInterrupt:
        if not plan.writer:
            raise
        raise RunInterrupted(state.held_after_interrupt()) from None
    except OSError as e:  # a file beside the artifact (a server's log): the folder failed
        if e.filename is None or not plan.writer:
            raise
        raise write_failed(e, path, *state.after_failed_write(), what=f"{e.filename}") \
            from None
    return record


def _run_cases(s: RunState, todo: list[CaseSpec], measure_case: Callable, here) -> None:
    """Measure every case still to do, in order, with each group's parity after its last
    case; the artifact is saved after each."""
    unfinished = True  # an exception (Ctrl-C) ends the loop: no `finished`, no ETA
    try:
        s.save()
        for i, case in enumerate(s.cases):
            if case.case_id not in s.done:
                s.progress.start_case(todo.index(case) + 1, len(todo), case.case_id,
                                      case.runs.processes
                                      * (1 + case.runs.warmup + case.runs.timed),
                                      runs=(case.runs.warmup, case.runs.timed))
                try:
                    rec = measure_case(case, s.pool, s.peak, s.progress.tick)
                except KeyboardInterrupt:  # Ctrl-C or SIGTERM: keep what it measured
                    s.keep_interrupted(case, here)
                    raise
                s.keep(case, rec, here, finished=True)
                s.progress.end_case(rec)
            group_done = i + 1 == len(s.cases) or group_of(s.cases[i + 1]) != group_of(case)
            if group_done:
                s.finish_group(case)
            needed = s.needed_after(i, group_done)
            s.pool.release_unneeded(needed)
            s.servers.release(needed)
        unfinished = False
    finally:
        s.progress.close(stopped=unfinished)
        s.pool.close()
        s.servers.close()


def exit_code(record: RunRecord) -> int:
    """0 when every case is ok (or skipped: a topology this machine lacks) and parity
    passed, 3 otherwise (the CLI's contract)."""
    ok = all(c.status in ("ok", "skipped") for c in record.cases)
    return 0 if ok and (record.parity is None or record.parity.passed) else 3

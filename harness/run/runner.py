"""Run every case of a config and keep every measurement: `run(config, out_dir) -> RunRecord`.

Neither prints (except the progress bar on a terminal) nor exits. The artifact is rewritten
atomically after every case and every parity group, so an interrupted or killed run keeps
all finished cases; `resume=ARTIFACT` re-runs only the missing or failed cases of the same
config (same sha256) into the same file.
"""

from __future__ import annotations

import datetime as dt
import secrets
import traceback
from collections.abc import Callable
from pathlib import Path

from mibench.engines import MibenchError, TopologyUnavailable
from mibench.harness.config.matrix import CaseSpec, expand
from mibench.harness.config.spec import Config
from mibench.harness.records import CaseRecord, ErrorInfo, RunRecord, read_artifact, write_artifact
from mibench.harness.run import memory, parity
from mibench.harness.run.measure import Timings, measure
from mibench.harness.run.peak import PeakTable
from mibench.harness.run.pool import EngineKey, EnginePool, make_call
from mibench.harness.run.progress import make_progress
from mibench.harness.run.provenance import collect
from mibench.harness.stats.metrics import case_metrics, score_digest, useful_flops


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def artifact_path(record: RunRecord, out_dir: str | Path) -> Path:
    return Path(out_dir) / f"{record.run_id}.json"


def new_record(config: Config, argv: list[str] | None, engine_repo) -> RunRecord:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return RunRecord(run_id=f"{config.name}-{stamp}-{secrets.token_hex(2)}", started_at=now(),
                     config=config.resolved(), config_sha256=config.sha256(),
                     provenance=collect(argv, engine_repo))


def resume_record(config: Config, path: Path) -> RunRecord:
    record = read_artifact(path)
    if record.config_sha256 != config.sha256():
        raise MibenchError(f"was written by a different config (sha256 {record.config_sha256[:12]}"
                           f" vs {config.sha256()[:12]}); resume only with the same config and "
                           "--set overrides, or start a new run", field=f"--resume {path}")
    record.cases = [c for c in record.cases if c.status == "ok"]
    record.resumed_at.append(now())
    record.finished_at = None
    record.parity = None
    return record


def _case_record(case: CaseSpec) -> CaseRecord:
    return CaseRecord(case_id=case.case_id, engine=case.engine, mode=case.mode,
                      params=dict(case.params), model={"path": case.model, "dtype": case.dtype},
                      topology={"tp": case.tp}, workload=case.workload.as_dict(),
                      runs={"warmup": case.runs.warmup, "timed": case.runs.timed,
                            "timeout_s": case.runs.timeout_s},
                      status="ok", started_at=now())


def run_case(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
             tick: Callable[[str], None]) -> CaseRecord:
    """Measure one case; any exception makes it `failed` with type, message and traceback."""
    rec, timings, requests, engine = _case_record(case), Timings(), None, None
    memory.reset_torch_peak()
    rss = memory.PeakRss(interval=0.01)
    try:
        engine = pool.get(case.engine_key)
        rec.topology = {**rec.topology, **engine.topology}
        rec.resolved = engine.resolved_options(case.mode, case.params)
        requests = pool.requests(case.engine_key, case.workload)
        with rss:
            measure(make_call(engine, requests, case), case.runs, timings, tick)
    except TopologyUnavailable as e:
        rec.status = "skipped"
        rec.error = ErrorInfo(type=type(e).__name__, message=str(e), traceback="")
        return rec
    except Exception as e:
        rec.status = "failed"
        rec.error = ErrorInfo(type=type(e).__name__, message=str(e),
                              traceback=traceback.format_exc())
    rec.compile_s, rec.warmup_s, rec.timed_s = (timings.compile_s, timings.warmup_s,
                                                timings.timed_s)
    if requests is not None and engine is not None:
        w = case.workload
        flops = useful_flops(engine.model_config, requests, w.delimiter,
                             len(w.label_token_ids), w.apply_softmax)
        chip_peak = peak(case.dtype) if timings.timed_s else None
        rec.metrics = case_metrics(timings.timed_s, requests, w.delimiter, flops,
                                   chip_peak * case.tp if chip_peak else None)
        if timings.first_result is not None:
            rec.metrics.score_digest = score_digest(timings.first_result)
    rec.metrics.peak_memory_bytes, rec.metrics.peak_memory_source = memory.peak_memory(
        case.engine, getattr(rss, "peak", None))
    return rec


class Session:
    """The state of one run: cases, finished records, engines, the artifact path."""

    def __init__(self, config: Config, record: RunRecord, path: Path, pool: EnginePool,
                 peak: PeakTable, progress, writer: bool = True):
        self.config, self.record, self.path, self.pool = config, record, path, pool
        self.peak, self.progress = peak, progress
        self.cases = expand(config)
        self.writer = writer  # in a multi-process run only process 0 writes
        self.done: dict[str, CaseRecord] = {c.case_id: c for c in record.cases}
        self.groups = _groups(self.cases)

    def save(self) -> None:
        order = [c.case_id for c in self.cases]
        self.record.cases = [self.done[i] for i in order if i in self.done]
        self.record.provenance.devices.peak_flops = dict(self.peak.values)
        self.record.provenance.devices.peak_source = self.peak.source
        if self.writer:
            write_artifact(self.record, self.path)

    def needed_after(self, i: int, group_done: bool) -> set[EngineKey]:
        """Engines that later cases, or the parity of the unfinished group, still need."""
        later = self.cases[i + 1:]
        keys = {c.engine_key for c in later} | parity.reference_keys(self.config, later)
        if self.parity_checks and not group_done:
            group = self.groups[_group(self.cases[i])]
            keys |= {c.engine_key for c in group} | parity.reference_keys(self.config, group)
        return keys

    @property
    def parity_checks(self) -> list[str]:
        return list(self.config.parity.checks) if self.config.parity else []

    def finish_group(self, case: CaseSpec) -> None:
        """After a group's last case: its parity checks (artifact saved after them)."""
        group = self.groups[_group(case)]
        if self.parity_checks:
            if self.record.parity is None:
                self.record.parity = parity.new_record(self.config)
            ok = [c for c in group if self.done[c.case_id].status == "ok"]
            self.progress.note(f"parity {_group(case)}")
            parity.check_group(self.config, self.pool, ok, self.record.parity,
                               [self.done[c.case_id] for c in ok])
            self.save()


def _group(case: CaseSpec) -> tuple[str, str, int]:
    return (case.model, case.dtype, case.tp)


def _groups(cases: list[CaseSpec]) -> dict[tuple, list[CaseSpec]]:
    out: dict[tuple, list[CaseSpec]] = {}
    for c in cases:
        out.setdefault(_group(c), []).append(c)
    return out


def run(config: Config, out_dir: str | Path = "artifacts", resume: str | Path | None = None,
        progress: bool = True, *, engine_repo: str | Path | None = None,
        argv: list[str] | None = None, engine_factory: Callable | None = None,
        peak: PeakTable | None = None, writer: bool = True) -> RunRecord:
    """Run every case (or, with `resume`, every missing or failed one) and the parity checks.

    Returns the final record; the artifact is `out_dir/<run_id>.json`, or the resumed file.
    In a multi-process run every process runs every case (the mesh spans all processes'
    devices) and only the `writer` (process 0) writes the artifact.
    """
    record = resume_record(config, Path(resume)) if resume else new_record(config, argv,
                                                                           engine_repo)
    path = Path(resume) if resume else artifact_path(record, out_dir)
    devices = record.provenance.devices
    if peak is None:
        peak = PeakTable(devices.platform, devices.kind)
        peak.values.update(devices.peak_flops)  # a resumed run keeps its measured peak
    finished = {c.case_id for c in record.cases}
    todo = [c for c in expand(config) if c.case_id not in finished]
    runs = sum(1 + c.runs.warmup + c.runs.timed for c in todo)
    s = Session(config, record, path, EnginePool(engine_factory), peak,
                make_progress(progress and writer, runs), writer=writer)
    try:
        s.save()
        for i, case in enumerate(s.cases):
            if case.case_id not in s.done:
                s.progress.start_case(todo.index(case) + 1, len(todo), case.case_id,
                                      1 + case.runs.warmup + case.runs.timed)
                s.done[case.case_id] = run_case(case, s.pool, peak, s.progress.tick)
                s.save()
            group_done = i + 1 == len(s.cases) or _group(s.cases[i + 1]) != _group(case)
            if group_done:
                s.finish_group(case)
            s.pool.release_unneeded(s.needed_after(i, group_done))
    finally:
        s.progress.close()
    record.finished_at = now()
    s.save()
    return record


def exit_code(record: RunRecord) -> int:
    """0 when every case is ok (or skipped: a topology this machine lacks) and parity
    passed, 3 otherwise (the CLI's contract)."""
    ok = all(c.status in ("ok", "skipped") for c in record.cases)
    return 0 if ok and (record.parity is None or record.parity.passed) else 3

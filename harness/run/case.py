"""Measuring one model case (`ModelCase`, the kind of the jax and torch engines:
harness/case_kinds.py) in the current process (the runner's, or an engine worker's): the
engine from the pool, its workload, the one timing loop, metrics and peak memory."""

from __future__ import annotations

import traceback
from collections.abc import Callable

from mibench.errors import InvalidScores, Unavailable

from ..case_kinds import CaseKind, kind_of
from ..config.cases import CaseSpec
from ..host import memory
from ..host.deadline import deadline
from ..records import (
    CaseRecord,
    ErrorInfo,
    Metrics,
)
from ..records.metrics import case_metrics, score_digest, useful_flops
from ..records.summaries import latency_of
from .measure import Timings, frozen_heap, measure
from .pool import (
    EnginePool,
    batch_pass,
    check_table,
    make_call,
    warm_runtime,
)

# cases measured in this process so far: the first one's device peak is its own (a fresh
# worker), a later one's only when it raised the peak (harness/host/memory.py)
_measured_here = [0]


def compile_counter():
    """The engines' `count_compiles`, or None where they lack it (an older revision
    measured by `mibench ab`: its cases then record no compile count)."""
    import mibench.engines

    return getattr(mibench.engines, "count_compiles", None)


def failed_record(case: CaseSpec, e: BaseException) -> CaseRecord:
    """The case `failed` with `e` (type, message, the traceback being handled)."""
    rec = CaseRecord.started(case)
    rec.status = "failed"
    rec.error = ErrorInfo(type=type(e).__name__, message=str(e),
                          traceback=traceback.format_exc())
    return rec


def metrics_of(case: CaseSpec, engine, requests, timed_s: list[float],
               peak: Callable[[str], float | None]) -> Metrics:
    """The one place a case's metrics are computed from its timed runs: throughput,
    latency, tokens/s, useful FLOPs and MFU against the chip peak times tp."""
    w = case.workload
    flops = useful_flops(engine.model_config, requests, w.delimiter, len(w.label_token_ids),
                         w.apply_softmax)
    chip_peak = peak(case.dtype) if timed_s else None
    return case_metrics(timed_s, requests, w.delimiter, flops,
                        chip_peak * case.tp if chip_peak else None)


def skipped_record(case: CaseSpec, e: BaseException) -> CaseRecord:
    """The case `skipped`: this machine lacks what it needs (mibench.errors.Unavailable)."""
    rec = CaseRecord.started(case)
    rec.status = "skipped"
    rec.error = ErrorInfo(type=type(e).__name__, message=str(e), traceback="")
    return rec


def _ready_for_rise(pool: EnginePool, engine, requests, case: CaseSpec) -> None:
    """Before a resident-set rise is measured: the engine's runtime warmed once (its
    one-time costs are no case's), then the heap's free pages given back (a case must not
    rise by less for reusing what earlier cases freed): harness/host/memory.py."""
    if case.engine_key not in pool.warmed:
        warm_runtime(engine, requests, case)
        pool.warmed.add(case.engine_key)
    memory.release_free_memory()


class ModelCase(CaseKind):
    """A case of an in-process engine (jax, torch) scoring the workload: its record's
    `params` are the mode's options, `compile_s` the first call (compilation and one run),
    `resolved` what those options run on this machine; metrics from the timed runs
    (harness/run/measure.py), peak memory, batch times."""

    name = "model"

    @property
    def fields(self) -> frozenset[str]:
        """The mode options. Looked up when used: the worker side takes no name but
        `load_engine` from `mibench.engines` at import (`mibench ab`'s older engines)."""
        from mibench.engines import OPTIONS

        return frozenset(OPTIONS)

    def after(self, case: CaseSpec, rec: CaseRecord, servers) -> None:
        """Nothing: a model case is all measured in `measure`."""

    def measure(self, case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
                tick: Callable[[str], None], measuring: Callable[[], None] = lambda: None
                ) -> CaseRecord:
        """Measure the case; any exception makes it `failed` with type, message and
        traceback, and so do scores that fail `check_scores` (whatever the engine: a fake,
        another revision's), which are never recorded."""
        return _measure_model(case, pool, peak, tick, measuring)


def _measure_model(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
                   tick: Callable[[str], None], measuring: Callable[[], None]) -> CaseRecord:
    rec, timings, requests, engine = CaseRecord.started(case), Timings(), None, None
    rss, before, reset = memory.PeakRss(interval=0.01), None, False
    fresh = _measured_here[0] == 0
    _measured_here[0] += 1
    try:
        engine = pool.get(case.engine_key)
        rec.topology = rec.topology.with_engine(engine.topology)
        rec.resolved = engine.resolved_options(case.mode, case.params)
        requests = pool.requests(case.engine_key, case.workload)
        reset = memory.reset_device_peak(engine)
        before = memory.device_peak(engine)
        counter = compile_counter()
        if counter is not None:  # its imports (JAX) now, not inside the case's deadline
            with counter():
                pass
        measuring()
        if before is None:  # the resident set's rise is the case's own figure
            _ready_for_rise(pool, engine, requests, case)
        with rss:
            measure(make_call(engine, requests, case), case.runs, timings, tick, counter)
        with deadline(case.runs.timeout_s), frozen_heap():  # outside the timed runs
            rec.batch_s = batch_pass(engine, requests, case)
    except Unavailable as e:
        return skipped_record(case, e)
    except Exception as e:
        rec.status = "failed"
        rec.error = ErrorInfo(type=type(e).__name__, message=str(e),
                              traceback=traceback.format_exc())
    rec.compile_s, rec.warmup_s, rec.timed_s = (timings.compile_s, timings.warmup_s,
                                                timings.timed_s)
    rec.load = timings.load
    if timings.first_result is not None:  # scores enter the record only checked
        try:
            check_table(timings.first_result, requests, case.workload, case.dtype)
        except InvalidScores as e:
            timings.first_result = None
            if rec.status == "ok":
                rec.status = "failed"
                rec.error = ErrorInfo(type=type(e).__name__, message=str(e), traceback="")
    if requests is not None and engine is not None:
        rec.metrics = metrics_of(case, engine, requests, timings.timed_s, peak)
        if timings.first_result is not None:
            rec.metrics.score_digest = score_digest(timings.first_result)
            rec.scores = timings.first_result
        rec.metrics.peak_rss_rise_bytes = timings.peak_rise_bytes
        rec.metrics.timed_compiles = timings.timed_compiles
        rec.metrics.first_call_compiles = timings.first_compiles
        rec.metrics.warmup_compiles = timings.warmup_compiles
        rec.metrics.batch_ms = latency_of([1000.0 * t for t in rec.batch_s or []])
    after = memory.device_peak(engine) if engine is not None else None
    rec.metrics.peak_memory_bytes, rec.metrics.peak_memory_source = memory.case_peak(
        reset, before, after, fresh, rss)
    return rec


MODEL_CASE = ModelCase()  # the kind of jax and torch cases (harness/case_kinds.py)


def run_case(case: CaseSpec, pool: EnginePool, peak: Callable[[str], float | None],
             tick: Callable[[str], None], measuring: Callable[[], None] = lambda: None
             ) -> CaseRecord:
    """Measure one case in this process (the runner's, or an engine worker's) as its kind
    does; a failure makes it `failed` or `skipped`. `measuring()` is called as the timed
    work starts."""
    return kind_of(case.engine).measure(case, pool, peak, tick, measuring)

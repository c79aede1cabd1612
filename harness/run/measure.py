"""Timing one case: the first call (compile + one run), warmup runs, timed runs.

Every engine call returns Python floats, so the device work has finished (synced, as
`block_until_ready` would) when the call returns: the clock stops after the results exist
on the host. `time.perf_counter` brackets each call and nothing else.

The heap that exists before a case (engines, torch, transformers: ~550k objects, whose full
garbage collection took 0.6 s on the 2-core CPU) is frozen out of the collector while the
case runs (`gc.freeze`, as `timeit` disables the collector), so a collection triggered by a
call's own allocations never walks it; the call's own garbage is still collected.

This is the one timing loop: every case of `mibench run` (the runner's `run_case`), the
modes benchmark (`configs/bench-modes.yaml`) and both sides of the overhead job
(`harness/jobs/overhead.py`) all time their calls here. Each timed call also records how
far the resident set peaked above its level just before the call (`memory.PeakRss`, read
outside the `perf_counter` bracket): `Timings.peak_rise_bytes`, the largest over the timed
calls. Around the calls (never inside a bracket) it notes how busy the machine was:
`Timings.load`, the CPU time other processes held (harness/host/busy.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable

from ..host.busy import Window
from ..host.deadline import deadline
from ..host.memory import PeakRss
from ..records import CaseLoad, RunsRecord


@dataclasses.dataclass
class Timings:
    """Filled in as the case runs, so a failure keeps whatever was measured before it."""

    compile_s: float | None = None
    warmup_s: list[float] = dataclasses.field(default_factory=list)
    timed_s: list[float] = dataclasses.field(default_factory=list)
    first_result: object = None
    # the largest rise of the resident set during one timed call above its level before it
    peak_rise_bytes: int | None = None
    timed_compiles: int | None = None  # compilations during the timed runs, when counted
    first_compiles: int | None = None  # compilations during the first call
    warmup_compiles: int | None = None  # compilations during the warmup runs
    load: CaseLoad | None = None  # other processes' share of the CPU while it ran


@contextlib.contextmanager
def frozen_heap():
    """Keep every object alive now out of the collections during the case (O(1): the
    generations are moved aside, and come back, garbage included, afterwards)."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _timed(call: Callable[[], object]) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = call()
    return time.perf_counter() - t0, out


def measure(call: Callable[[], object], plan: RunsRecord, timings: Timings,
            tick: Callable[[str], None] = lambda label: None,
            count_compiles: Callable | None = None, window: Window | None = None) -> Timings:
    """Run `call` 1 + warmup + timed times, appending each duration to `timings` (and the
    largest resident-set rise of a timed call to `timings.peak_rise_bytes`); with
    `count_compiles`, the compilations of the first call, the warmup and the timed runs;
    the machine's load over them in `timings.load` (`window`: its probe, load.Window)."""
    def counted():
        return count_compiles() if count_compiles else contextlib.nullcontext()

    window = window or Window()
    window.mark()  # outside the deadline: reading /proc is no part of the case
    try:
        with deadline(plan.timeout_s), frozen_heap():
            with counted() as compiles:
                timings.compile_s, timings.first_result = _timed(call)
            if compiles is not None:
                timings.first_compiles = compiles()
            tick("compile")
            window.mark()
            with counted() as compiles:
                for k in range(plan.warmup):
                    timings.warmup_s.append(_timed(call)[0])
                    tick(f"warmup {k + 1}/{plan.warmup}")
            if compiles is not None:
                timings.warmup_compiles = compiles()
            window.mark()
            with counted() as compiles:
                for k in range(plan.timed):
                    with PeakRss(interval=0.01) as rss:
                        timings.timed_s.append(_timed(call)[0])
                    timings.peak_rise_bytes = max(timings.peak_rise_bytes or 0, rss.extra)
                    tick(f"run {k + 1}/{plan.timed}")
            window.end()
            if compiles is not None:
                timings.timed_compiles = compiles()
    finally:  # also when the deadline cut the case short: how busy the machine was
        if window.last is None:
            window.end()
        timings.load = window.load()
    return timings

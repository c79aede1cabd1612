"""How busy the machine was while something was measured (harness/host/busy.py)."""

from __future__ import annotations

from .base import Record


class CaseLoad(Record):
    """How busy the machine was while the case was measured (harness/host/busy.py): the CPU
    time of processes outside mibench's own process tree."""

    window_s: float  # from the timed runs', warmup's or first call's start to their end
    cpus: int  # CPUs the machine's clock ticks came from
    other_share: float  # other processes' CPU time / the machine's (window x cpus), 0..1
    other_cpu_s: float  # their CPU seconds in the window
    own_cpu_s: float | None = None  # mibench's own process tree's (None: faked)
    source: str  # "/proc", or "fake: MIBENCH_FAKE_OTHER_LOAD=..." (tests, demos)

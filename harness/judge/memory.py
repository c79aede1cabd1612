"""A case's own peak memory judged like its time (pure: two cases in, a check out).

Two peaks are compared only when both are a case's own (`OWN_SOURCES`: `device`, the
device's peak in a fresh worker or one the case raised; `rss-rise`, the resident set's rise
during the case on a CPU) and of the same kind: a device peak against a resident-set rise
measures different memories, a `device-bound` is an upper bound (an earlier case of the
process peaked higher), and `rss` (older artifacts) is the process's whole resident set.
Where they are not compared the check says why.

One convention with time (`mibench compare`, `ab`, `history`): change = new / base - 1,
`+` = larger. A peak grown by more than the memory threshold, and by more than its kind's
noise in bytes (`MIN_GROWTH`), is a memory regression.
"""

from __future__ import annotations

import dataclasses

from ..records import CaseRecord
from ..records.run import OWN_MEMORY_SOURCES as OWN_SOURCES

DEFAULT_MEMORY_THRESHOLD = 0.10  # peaks move little run to run: allocators are deterministic
# growth smaller than this (bytes) is never a regression, whatever its ratio. A resident-set
# rise is noisy: three runs of one tiny config (embedded:tiny, 24 items) on the 2-core EPYC
# rose 29.9, 39.1 and 32.0 MiB in one case and 0.03, 0.29 and 0.26 MiB in another (9x).
# It also depends a little on the cases before it in the worker (compiled pieces and
# allocator pages they leave), even with the runtime warmed first (harness/run/pool.py
# `warm_runtime`): a 3-case tiny config on the 2-core Xeon, each case alone vs in the full
# run: 20.0 vs 19.9, 5.1 vs 8.3, 18.7 vs 6.3 MiB (without the warm-up the first case rose
# ~120 MiB and the others 9-13). 32 MiB is above both. A device peak in a fresh worker
# repeats.
MIN_GROWTH = {"rss-rise": 32 << 20, "device": 1 << 20}

WHY_NOT_OWN = {
    "device-bound": "an upper bound (an earlier case of the worker peaked higher)",
    "rss": "the process's resident set (an older artifact), not the case's own",
}


@dataclasses.dataclass(frozen=True)
class MemoryCheck:
    """The case's own peak against the baseline's, or why they were not compared."""

    base_bytes: int | None
    new_bytes: int | None
    base_source: str | None
    new_source: str | None
    ratio: float | None  # new / base; None: not compared
    change: float | None  # ratio - 1, + = larger
    threshold: float
    regression: bool
    note: str  # what was found, or why not compared


def own(bytes_: int | None, source: str | None) -> bool:
    """A case's own peak: recorded, and of an own source."""
    return bytes_ is not None and bytes_ > 0 and source in OWN_SOURCES


def why_not(side: str, bytes_: int | None, source: str | None) -> str | None:
    """Why one side's peak cannot be judged (None: it can)."""
    if bytes_ is None or source is None:
        return f"the {side} peak was not recorded"
    if source in OWN_SOURCES:
        return None if bytes_ > 0 else f"the {side} peak is {bytes_} bytes"
    what = WHY_NOT_OWN.get(source, "not the case's own")
    return f"the {side} peak is {source}: {what}"


def memory_check(base: CaseRecord, new: CaseRecord,
                 threshold: float = DEFAULT_MEMORY_THRESHOLD) -> MemoryCheck:
    """The memory verdict of two ok cases (see the module docstring)."""
    b, n = base.metrics, new.metrics
    sides = dict(base_bytes=b.peak_memory_bytes, new_bytes=n.peak_memory_bytes,
                 base_source=b.peak_memory_source, new_source=n.peak_memory_source,
                 threshold=threshold)
    why = (why_not("baseline", b.peak_memory_bytes, b.peak_memory_source)
           or why_not("new", n.peak_memory_bytes, n.peak_memory_source))
    if why is None and b.peak_memory_source != n.peak_memory_source:
        why = (f"different kinds of peak: {b.peak_memory_source} (baseline) vs "
               f"{n.peak_memory_source} (new)")
    if why is not None:
        return MemoryCheck(**sides, ratio=None, change=None, regression=False,
                           note=f"memory not compared: {why}")
    ratio = n.peak_memory_bytes / b.peak_memory_bytes
    floor = MIN_GROWTH.get(n.peak_memory_source, 0)
    beyond = ratio - 1 > threshold
    grew = beyond and n.peak_memory_bytes - b.peak_memory_bytes > floor
    what = (f"grew by more than {threshold:.0%}" if grew else
            f"beyond {threshold:.0%} but by at most {floor / 2**20:g} MiB, within the noise"
            if beyond else f"within {threshold:.0%}")
    return MemoryCheck(**sides, ratio=ratio, change=ratio - 1, regression=grew,
                       note=f"peak memory ({n.peak_memory_source}) {ratio - 1:+.1%}: {what}")

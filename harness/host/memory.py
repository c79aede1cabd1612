"""Peak memory of a case, its own: device memory stats where the backend has them (JAX's
`peak_bytes_in_use`, the largest over the chips; torch's `max_memory_allocated`, reset
before each case by the engine's `reset_device_peak`), else how far the resident set rose
while the case ran (`PeakRss`: what the case itself adds on the host, over the engine
already loaded and its runtime warmed by one tiny untimed call before the process's first
case, harness/run/pool.py `warm_runtime`: otherwise the first case measured in a worker
carries the runtime's one-time ~100 MiB; and with the C heap's free memory given back
first, `release_free_memory`: otherwise a case reuses the pages earlier cases freed and
rises by less. Both keep a case's figure from depending on the cases before it).

JAX's device peak cannot be reset: it only grows over a process. So on a GPU or TPU each
case is measured in a fresh worker (harness/run/runner.py), and `case_peak` calls a
device peak the case's own (`device`) only when the process was fresh or the case raised
the peak; otherwise it is an upper bound (`device-bound`: an earlier case of the process
peaked higher). An engine may expose `memory_stats()` (a list of per-device stats, as
`jax.Device.memory_stats` gives): the test fake's device does, the JAX engine leaves it to
JAX; an engine whose backend keeps a peak of its own that it can reset exposes
`device_peak()` and `reset_device_peak()` instead (the torch engine: CUDA's).

`PeakRss` is the one resident-set peak: on Linux the kernel's own high-water mark (VmHWM),
reset at the block's entry (5 to /proc/self/clear_refs, Linux >= 4.0), so the peak is
exact and no thread shares the cores with the timed calls; elsewhere a thread samples the
resident set every `interval` s.
"""

from __future__ import annotations

import os
import resource
import sys
import threading

from ..records.run import OWN_MEMORY_SOURCES


def rss_bytes() -> int:
    """The process's resident set now (Linux /proc; the lifetime peak elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return _lifetime_peak_rss()


def _high_water_bytes() -> int:
    """The resident set's high-water mark since the last reset (VmHWM, Linux)."""
    with open("/proc/self/status") as f:
        kib = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    return int(kib) * 1024


def _reset_high_water() -> bool:
    """Reset VmHWM to the resident set now; False where the kernel cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _high_water_bytes()
    except (OSError, StopIteration, ValueError):
        return False
    return True


# PeakRss blocks open now, outermost first: an inner block's reset of the high-water mark
# first hands the peak so far to the blocks around it, so nesting keeps every peak exact
_open: list[PeakRss] = []


class PeakRss:
    """`with PeakRss() as rss: ...`; `.peak` is the highest resident set during the block,
    `.extra` its rise above the level at entry. `.exact`: the kernel's high-water mark was
    used (else a thread sampled every `interval` s)."""

    def __init__(self, interval: float = 0.002):
        self.interval = interval
        self.exact = False
        self._thread = None

    def __enter__(self):
        for outer in _open:
            outer._fold()
        self.exact = _reset_high_water()
        self.base = self.peak = rss_bytes()
        if not self.exact:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        _open.append(self)
        return self

    def _fold(self) -> None:
        if self.exact:
            self.peak = max(self.peak, _high_water_bytes())

    def _sample(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc):
        if self in _open:
            _open.remove(self)
        if self.exact:
            self._fold()
        else:
            self._stop.set()
            self._thread.join()
            self.peak = max(self.peak, rss_bytes())

    @property
    def extra(self) -> int:
        return self.peak - self.base


def release_free_memory() -> bool:
    """Give the C heap's free memory back to the system (glibc's `malloc_trim(0)`), so a
    resident-set rise measured next counts every page the next case touches, not only the
    pages the allocator had to ask for anew: without it a case that runs after one that
    freed a lot reuses those pages and rises by less (a 3-case config on the 2-core Xeon:
    prefill_extend rose 0.0 MiB after packed and chunked, 27.0 alone; with it 78.9 and
    74.9). False where there is no glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        trim = getattr(libc, "malloc_trim", None)
    except OSError:
        return False
    if trim is None:
        return False
    trim(0)
    return True


def _lifetime_peak_rss() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _device_stats(engine) -> list | None:
    """Per-device memory stats: the engine's own `memory_stats()` where it has one, else
    JAX's local devices (only once the process has imported jax)."""
    own = getattr(engine, "memory_stats", None)
    if callable(own):
        return own()
    if "jax" not in sys.modules:
        return None
    import jax

    out = []
    for device in jax.local_devices():
        try:
            out.append(device.memory_stats())
        except Exception:  # backends without memory stats raise or return None
            return None
    return out


def jax_device_peak(engine=None) -> int | None:
    """The largest `peak_bytes_in_use` over the devices (per chip, for tp > 1); None where
    the backend keeps no memory stats (a CPU)."""
    peaks = []
    for stats in _device_stats(engine) or []:
        if not stats or "peak_bytes_in_use" not in stats:
            return None
        peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None


def reset_device_peak(engine) -> bool:
    """Start the engine's device peak over where its backend can (its own
    `reset_device_peak()`: the torch engine's CUDA peak); whether it did."""
    reset = getattr(engine, "reset_device_peak", None)
    return bool(reset()) if callable(reset) else False


def device_peak(engine) -> int | None:
    """The device peak of the engine's backend now (None on a CPU): its own
    `device_peak()` where it has one (the torch engine's CUDA peak), else JAX's."""
    own = getattr(engine, "device_peak", None)
    return own() if callable(own) else jax_device_peak(engine)


# what `peak_memory_source` says (docs/artifacts.md); the artifact's vocabulary, so in records
OWN_SOURCES = OWN_MEMORY_SOURCES  # a case's own peak: `compare` and `history` judge them


def case_peak(reset: bool, before: int | None, after: int | None, fresh: bool,
              rss: PeakRss | None) -> tuple[int | None, str | None]:
    """(bytes, source) of one case. A device peak (`after`, read when the case ended) is
    the case's own (`device`) when it was `reset` before the case, when the process had
    measured nothing before (`fresh`), or when the case raised it above `before` (read as
    the case started); else `device-bound`, an upper bound. Without device stats: the
    resident set's rise during the case (`rss-rise`)."""
    if after is not None:
        own = reset or fresh or before is None or after > before
        return after, "device" if own else "device-bound"
    if rss is not None and getattr(rss, "base", None) is not None:
        return rss.extra, "rss-rise"
    return None, None

"""Peak memory of a case: device memory stats where the backend has them (JAX's
`peak_bytes_in_use`, the largest over the chips; torch's `max_memory_allocated`, reset
before each case), else the peak resident set size while the case ran (`PeakRss`).
JAX's device peak only grows over a run: read it as an upper bound for the case.

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


def _lifetime_peak_rss() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _jax_device_peak() -> int | None:
    """The largest `peak_bytes_in_use` over the local devices (per chip, for tp > 1)."""
    if "jax" not in sys.modules:
        return None
    import jax

    peaks = []
    for device in jax.local_devices():
        try:
            stats = device.memory_stats()
        except Exception:  # backends without memory stats raise or return None
            return None
        if not stats or "peak_bytes_in_use" not in stats:
            return None
        peaks.append(int(stats["peak_bytes_in_use"]))
    return max(peaks) if peaks else None


def _torch_device_peak() -> int | None:
    if "torch" not in sys.modules:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.max_memory_allocated())


def reset_torch_peak() -> None:
    if "torch" in sys.modules:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()


def peak_memory(engine_name: str, case_rss: int | None = None) -> tuple[int, str]:
    """(bytes, source) for the engine's device, else the resident-set peak of the case
    (else the process's lifetime peak)."""
    value = _jax_device_peak() if engine_name == "jax" else _torch_device_peak()
    if value is not None:
        return value, "device"
    return (case_rss, "rss") if case_rss is not None else (_lifetime_peak_rss(), "rss")

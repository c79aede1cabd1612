"""Peak memory of a case: device memory stats where the backend has them (JAX's
`peak_bytes_in_use`, the largest over the chips; torch's `max_memory_allocated`, reset
before each case), else the process's peak resident set size. JAX's and the RSS peaks
only grow over a run: read them as upper bounds for the case."""

from __future__ import annotations

import resource
import sys


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


def peak_memory(engine_name: str) -> tuple[int, str]:
    """(bytes, source) for the engine's device, falling back to the process peak RSS."""
    value = _jax_device_peak() if engine_name == "jax" else _torch_device_peak()
    if value is not None:
        return value, "device"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024), "rss"

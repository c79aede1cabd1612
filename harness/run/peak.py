"""Peak FLOP/s per chip, the denominator of `mfu`.

TPU/GPU: the vendor's dense peak by device kind (`VENDOR`, matched by substring of JAX's
`device_kind`). CPU: a short matmul calibration with JAX, measured once per run per dtype
(the best of a few 1024^3 matmuls after a warm-up), so CPU `mfu` is relative to what this
machine's GEMM really reaches.
"""

from __future__ import annotations

import time

# device kind substring (lower case) -> dtype -> dense FLOP/s per chip (vendor figures;
# float32 on TPUs is the MXU's bf16 figure, float32 on GPUs the TF32 tensor-core figure)
VENDOR: dict[str, dict[str, float]] = {
    "tpu v6": {"bfloat16": 918e12, "float32": 918e12},
    "tpu v5p": {"bfloat16": 459e12, "float32": 459e12},
    "tpu v5 lite": {"bfloat16": 197e12, "float32": 197e12},
    "tpu v5e": {"bfloat16": 197e12, "float32": 197e12},
    "tpu v4": {"bfloat16": 275e12, "float32": 275e12},
    "h200": {"bfloat16": 989e12, "float32": 494e12},
    "h100": {"bfloat16": 989e12, "float32": 494e12},
    "a100": {"bfloat16": 312e12, "float32": 156e12},
    "l4": {"bfloat16": 121e12, "float32": 60e12},
    "rtx 6000 ada": {"bfloat16": 364e12, "float32": 182e12},
}


def vendor_peak(kind: str, dtype: str) -> float | None:
    kind = kind.lower()
    for key, table in VENDOR.items():
        if key in kind:
            return table.get(dtype)
    return None


def calibrate_cpu(dtype: str, n: int = 1024, reps: int = 5) -> float:
    """Best FLOP/s of an n x n x n matmul in `dtype` on JAX's CPU backend."""
    import jax
    import jax.numpy as jnp

    a = jnp.ones((n, n), dtype=dtype)
    b = jnp.ones((n, n), dtype=dtype)
    mm = jax.jit(jnp.matmul)
    mm(a, b).block_until_ready()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        mm(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best


class PeakTable:
    """Per-chip peak by dtype for this run's device, computed on first use and kept."""

    def __init__(self, platform: str | None, kind: str | None):
        self.platform, self.kind = platform or "cpu", kind or ""
        self.values: dict[str, float] = {}
        self.source = "calibrated" if self.platform == "cpu" else "vendor"

    def __call__(self, dtype: str) -> float | None:
        if dtype not in self.values:
            if self.platform == "cpu":
                value = calibrate_cpu(dtype)
            else:
                value = vendor_peak(self.kind, dtype)
            if value is None:
                return None
            self.values[dtype] = value
        return self.values[dtype]

"""Peak FLOP/s per chip, the denominator of `mfu`.

TPU/GPU: the vendor's dense peak by device kind (`VENDOR`, matched by substring of JAX's
`device_kind`). CPU: a matmul calibration with JAX (the best of a few 1024^3 matmuls after
a warm-up), measured **once per machine** and cached in `$MIBENCH_CACHE/peak.json`, keyed by
the CPU model, the CPUs this process may use, the dtype and the jax version: a measurement
repeated every run moves by tens of percent on a busy machine (1.05e11 to 1.79e11 seen on
one), and would move every CPU `mfu` with it. A calibration during which the threads
mostly waited for a CPU (another process was busy) is not cached **and not used**: with no
quiet calibration cached the peak is unknown and so is `mfu` (3.89% and 5.63% were seen for
the same items/s from two busy runs' own measurements); `mibench env` on a quiet machine
calibrates it. Delete the file (or its entry) to measure again. `PeakTable.source` says
where the figure came from, e.g. `calibrated (cached 2026-11-26, AMD EPYC 7B13, 2 cpus,
jax 0.10.2)`, or why there is none.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from mibench.files import read_bounded

CACHE_FILE = "peak.json"
CACHE_VERSION = 1
MAX_CACHE_BYTES = 16 * 1024**2  # a few entries per machine: kilobytes
# a calibration whose threads waited for a CPU more than this share of their time measured
# a busy machine, not its peak (2 to 5% when idle, 55% beside two busy loops on 2 CPUs):
# it is tried again, and never cached
BUSY, ATTEMPTS, RETRY_S = 0.2, 3, 2.0

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


def calibrate_cpu(dtype: str, n: int = 1024, reps: int = 20) -> float:
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


def run_queue_ns() -> tuple[int, int] | None:
    """(ns running, ns waiting for a CPU) of this process's threads so far (Linux's
    schedstat), or None where the kernel does not say."""
    run = wait = 0
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return None
    for task in tasks:
        try:
            r, w, _ = (task / "schedstat").read_text().split()
        except (OSError, ValueError):  # a thread that ended, or no schedstat
            continue
        run, wait = run + int(r), wait + int(w)
    return (run, wait) if run else None


def measure(dtype: str, calibrate) -> tuple[float, float | None]:
    """(FLOP/s, the share of the time the threads waited for a CPU, None: unknown)."""
    before = run_queue_ns()
    flops = calibrate(dtype)
    after = run_queue_ns()
    if before is None or after is None:
        return flops, None
    run, wait = after[0] - before[0], after[1] - before[1]
    return flops, wait / (run + wait) if run + wait >= 5e7 else None  # 50 ms or it says nothing


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what `platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return " ".join(value.split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown cpu"


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine(dtype: str) -> dict:
    """What a cached CPU peak is valid for."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        jax_version = version("jax")
    except PackageNotFoundError:
        jax_version = "unknown"
    return {"cpu": cpu_model(), "cpus": usable_cpus(), "dtype": dtype, "jax": jax_version}


def _key(m: dict) -> str:
    return f"{m['cpu']} | {m['cpus']} cpus | {m['dtype']} | jax {m['jax']}"


def cache_path() -> Path:
    from mibench.engines import cache_dir

    return cache_dir() / CACHE_FILE


def read_cache(path: Path) -> dict:
    """The cache's entries; an unreadable or foreign file is an empty cache (it is only a
    cache: the next calibration rewrites it)."""
    try:
        data = json.loads(read_bounded(path, MAX_CACHE_BYTES, "calibration cache"))
    except (OSError, ValueError):  # Unreadable is a ValueError
        return {}
    ok = isinstance(data, dict) and data.get("version") == CACHE_VERSION
    entries = data.get("entries") if ok else None
    return entries if isinstance(entries, dict) else {}


def write_cache(path: Path, entries: dict) -> None:
    """Atomically (a concurrent reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump({"version": CACHE_VERSION, "entries": entries}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached_cpu_peak(dtype: str, path: Path | None = None,
                    calibrate=None) -> tuple[float | None, dict]:
    """(FLOP/s, its cache entry) for this machine and `dtype`: the cached figure, else a
    calibration that is then cached. A calibration on a busy machine (`BUSY`) is tried
    again, and if the machine stays busy it is not used: (None, the entry with `cached:
    false`, `busy: true` and why). A quiet one whose cache cannot be written is used for
    this run only (`cached: false` and why)."""
    path = path or cache_path()
    m = machine(dtype)
    entry = read_cache(path).get(_key(m))
    if isinstance(entry, dict) and isinstance(entry.get("flops"), int | float) \
            and entry["flops"] > 0:
        return float(entry["flops"]), {**entry, "cached": True}
    best, busy = 0.0, None
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(RETRY_S)
        flops, busy = measure(dtype, calibrate or calibrate_cpu)
        best = max(best, flops)
        if busy is None or busy <= BUSY:
            break
    entry = {**m, "flops": best, "calibrated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")}
    if busy is not None and busy > BUSY:
        return None, {**entry, "cached": False, "busy": True,
                      "why": f"the CPUs were busy, its threads waited for one {busy:.0%} of "
                             "the time"}
    try:
        entries = read_cache(path)  # re-read: another run may have added its own
        entries[_key(m)] = entry
        write_cache(path, entries)
        return entry["flops"], {**entry, "cached": True}
    except OSError as e:
        return entry["flops"], {**entry, "cached": False, "why": e.strerror or str(e)}


def known_cpu_peak(dtype: str, path: Path | None = None) -> tuple[float | None, str]:
    """(FLOP/s, where it came from) of this machine's CPU in `dtype` from the cache only, or
    (None, why not): never a calibration, so `validate` stays quick (a run calibrates and
    caches it, and so does `mibench env`)."""
    path = path or cache_path()
    m = machine(dtype)
    entry = read_cache(path).get(_key(m))
    if isinstance(entry, dict) and isinstance(entry.get("flops"), int | float) \
            and entry["flops"] > 0:
        return float(entry["flops"]), (f"calibrated {entry.get('calibrated_at', '?')}, "
                                       f"{m['cpu']}, {m['cpus']} cpus")
    return None, (f"no {dtype} peak of this CPU is cached yet ({path}; `mibench env` or a "
                  "run on a quiet machine measures it)")


def describe(entries: list[dict]) -> str:
    """Where a run's CPU peak came from: `calibrated (cached 2026-11-26, CPU, N cpus, jax
    V)`, a quiet calibration that could not be cached, or `unknown: ...` (busy)."""
    if not entries:
        return "calibrated"
    dates = sorted({e.get("calibrated_at", "?") for e in entries})
    first = entries[0]
    where = f"{first['cpu']}, {first['cpus']} cpus, jax {first['jax']}"
    busy = [e for e in entries if e.get("busy")]
    if busy:
        return (f"unknown, so MFU is not computed: no quiet calibration of this CPU is cached "
                f"and this run's ({busy[0]['why']}) is not used; `mibench env` on a quiet "
                f"machine calibrates it ({where})")
    if all(e.get("cached") for e in entries):
        return f"calibrated (cached {', '.join(dates)}, {where})"
    why = next(e.get("why") for e in entries if not e.get("cached"))
    return f"calibrated (this run, not cached: {why}; {where})"


class PeakTable:
    """Per-chip peak by dtype for this run's device, computed on first use and kept."""

    def __init__(self, platform: str | None, kind: str | None):
        self.platform, self.kind = platform or "cpu", kind or ""
        self.values: dict[str, float] = {}
        self.entries: dict[str, dict] = {}  # CPU: dtype -> the cache entry used
        self.unknown: set[str] = set()  # dtypes with no peak (asked once)
        self.kept: str | None = None  # the source of `values` given from outside (a resume)

    @property
    def source(self) -> str:
        if self.platform != "cpu":
            return "vendor"
        if not self.entries and self.kept:
            return self.kept
        return describe(list(self.entries.values()))

    def __call__(self, dtype: str) -> float | None:
        """The peak for `dtype`, or None (unknown: an unknown accelerator, or a CPU with no
        quiet calibration); asked once per dtype and kept either way."""
        if dtype not in self.values and dtype not in self.unknown:
            if self.platform == "cpu":
                value, self.entries[dtype] = cached_cpu_peak(dtype)
            else:
                value = vendor_peak(self.kind, dtype)
            if value is None:
                self.unknown.add(dtype)
                return None
            self.values[dtype] = value
        return self.values.get(dtype)

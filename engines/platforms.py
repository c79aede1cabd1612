"""Which backends JAX may start in a mibench process: with libtpu installed (the `tpu`
extra) JAX tries its TPU backend on any machine, and on one without a TPU libtpu prints
five lines of start-up noise (`Failed to find host bounds ...`, `TPU_WORKER_HOSTNAMES`)
before JAX falls back to the CPU. `skip_absent_tpu` sets `JAX_PLATFORMS=cpu` there, before
JAX starts, so every command's output is its own.

Left alone: a machine with a TPU chip or a GPU, a process where `JAX_PLATFORMS` is set
already (the user's choice), and a process without libtpu. `mibench compile` loads libtpu
on purpose, in its own workers (TPU_LIBRARY_PATH; harness/compile/libtpu.py `worker_env`),
whatever this says. Nothing here imports JAX: it runs at every command's start.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def _hardware_utils():
    """JAX's own PCI probe (`jax._src.hardware_utils`: stdlib only), loaded from its file
    without importing jax (which would take a second at every command's start); None
    when it cannot be found."""
    spec = importlib.util.find_spec("jax")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "_src" / "hardware_utils.py"
    loader = importlib.util.spec_from_file_location("_mibench_jax_hardware", path)
    if loader is None or not path.is_file():
        return None
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


def accelerators() -> dict[str, int] | None:
    """This machine's accelerator chips by kind ({"tpu": 4, "gpu": 1}; {}: none), from
    JAX's PCI probe without starting JAX (milliseconds); None when it cannot tell."""
    try:
        hw = _hardware_utils()
        if hw is None:
            return None
        found = {"tpu": hw.num_available_tpu_chips_and_device_id()[0],
                 "gpu": int(hw.has_visible_nvidia_gpu())
                 + max(hw.num_available_amd_gpus(stop_at=1), 0)}
    except Exception:  # noqa: BLE001 - another jax's probe: then leave JAX to decide
        return None
    return {k: n for k, n in found.items() if n}


def absent_tpu() -> bool:
    """Whether libtpu is installed but this machine has no TPU chip and no GPU, so JAX's
    TPU backend can only fail, noisily."""
    if importlib.util.find_spec("libtpu") is None:
        return False
    return accelerators() == {}


def skip_absent_tpu() -> bool:
    """Set `JAX_PLATFORMS=cpu` for this process and its children when `absent_tpu` and
    the variable is unset; True when it did."""
    if "JAX_PLATFORMS" in os.environ or not absent_tpu():
        return False
    os.environ["JAX_PLATFORMS"] = "cpu"
    return True

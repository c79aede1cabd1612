"""Multi-process runs (one process per host, as on multi-host TPU slices).

Call `initialize` before anything touches a JAX backend. Explicit arguments win; else the
environment: JAX_COORDINATOR_ADDRESS with JAX_NUM_PROCESSES and JAX_PROCESS_ID, or
MIBENCH_DISTRIBUTED=auto to let JAX detect its cluster (Cloud TPU, SLURM, ...). On CPU
the processes talk through JAX's gloo collectives, so a two-process run works on loopback.
"""

from __future__ import annotations

import os

from mibench.errors import MibenchError


def _from_env() -> tuple[str | None, int | None, int | None]:
    addr = os.environ.get("JAX_COORDINATOR_ADDRESS")
    if not addr:
        return None, None, None
    try:
        return addr, int(os.environ["JAX_NUM_PROCESSES"]), int(os.environ["JAX_PROCESS_ID"])
    except (KeyError, ValueError):
        raise MibenchError("JAX_COORDINATOR_ADDRESS needs integer JAX_NUM_PROCESSES and "
                           "JAX_PROCESS_ID", field="environment") from None


def initialize(coordinator: str | None = None, num_processes: int | None = None,
               process_id: int | None = None) -> bool:
    """Join the multi-process run if one is asked for; True when there is one."""
    import jax

    if coordinator is None:
        coordinator, num_processes, process_id = _from_env()
    auto = os.environ.get("MIBENCH_DISTRIBUTED") == "auto"
    if coordinator is None and not auto:
        return False
    if coordinator is not None and (num_processes is None or process_id is None):
        raise MibenchError("--coordinator needs --num-processes and --process-id",
                           field="coordinator")
    if coordinator is not None and not 0 <= process_id < num_processes:
        raise MibenchError(f"process id {process_id} is not in [0, {num_processes})",
                           field="process_id")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if coordinator is None:
        jax.distributed.initialize()
    else:
        jax.distributed.initialize(coordinator_address=coordinator,
                                   num_processes=num_processes, process_id=process_id)
    return jax.process_count() > 1


def is_writer() -> bool:
    """Only process 0 writes artifacts and reports."""
    import jax

    return jax.process_index() == 0

"""The first code a worker process runs: it decides which `mibench.engines` the worker
imports before anything imports it. With `engine_root` (a git worktree of another
revision, for `mibench ab` and `bisect`) the engines come from that checkout while the
harness (worker protocol, timing loop, workloads) stays the current one, so both sides of
an A/B comparison are measured by the same code. Imports nothing of the engines itself."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def use_engines_from(root: str | Path) -> None:
    """Make `mibench.engines` (and its submodules) load from `root/engines`."""
    folder = Path(root) / "engines"
    spec = importlib.util.spec_from_file_location(
        "mibench.engines", folder / "__init__.py", submodule_search_locations=[str(folder)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["mibench.engines"] = module
    import mibench

    mibench.engines = module
    spec.loader.exec_module(module)


def main(fd: int, engine_root: str, role: str = "engine") -> None:
    """The worker's entry point: `python -m mibench.harness.run.bootstrap FD [ROOT [ROLE]]`,
    FD its end of the socket pair, ROOT the other revision's checkout (or empty), ROLE
    `engine` (an engine worker, harness/run/worker_loop.py) or `compile` (a compile worker,
    harness/compile/worker.py)."""
    from multiprocessing.connection import Connection

    conn = Connection(fd)
    if engine_root:
        use_engines_from(engine_root)  # before anything (the factory too) is unpickled
    if role == "compile":
        from ..compile.worker import serve as serve_compiles

        serve_compiles(conn)
    else:
        key, factory = conn.recv()
        from .worker_loop import serve

        serve(conn, key, factory)
    _exit_now(conn)


def _exit_now(conn) -> None:
    """The work is done and answered: leave without the interpreter's teardown (JAX's and
    XLA's take about a second per worker, which the parent would wait for)."""
    import os

    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    conn.close()
    os._exit(0)


def check(engine_root: str) -> int:
    """`python -m mibench.harness.run.bootstrap check ROOT`: can this harness's workers run
    ROOT's engines? They import the harness's worker side (which takes from
    `mibench.engines` only what every revision since the engine contract has, looking up
    the rest when used) and build engines with `load_engine`. Exit 0, or 1 with the
    ImportError as one line on stderr (`mibench ab` refuses such a revision,
    harness/ab/revisions.py)."""
    use_engines_from(engine_root)
    try:
        import mibench.harness.compile.worker  # noqa: F401
        import mibench.harness.run.worker  # noqa: F401
        import mibench.harness.run.worker_loop  # noqa: F401
        from mibench.engines import load_engine  # noqa: F401  (what a worker builds with)
    except ImportError as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    main(int(sys.argv[1]), *sys.argv[2:4])

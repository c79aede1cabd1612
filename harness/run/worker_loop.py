"""The engine worker's side of harness/run/worker.py's protocol (the module docstring there
says it): `serve` answers the parent's requests in the worker process, measuring a case
here (`_case`: run_case, so the timed loop never crosses the pipe), and an interruption
(SIGTERM) becomes `Interrupted` in the case. `EngineInfo` is what `info` answers."""

from __future__ import annotations

import dataclasses
import os
import signal
import traceback
from collections.abc import Callable

from ..case_kinds import kind_of
from ..config.keys import EngineKey
from ..host import busy
from ..host.children import Interrupted
from ..records import ErrorInfo
from .case import run_case
from .pool import EnginePool


@dataclasses.dataclass(frozen=True)
class EngineInfo:
    """What the parent may ask of an engine without a round trip."""

    name: str
    model: str
    dtype: str
    tp: int
    modes: tuple[str, ...]
    model_config: object
    topology: dict
    special_ids: frozenset


def serve(conn, key: EngineKey, factory: Callable | None) -> None:
    """Answer the parent's requests until `close` (or until the parent is gone). Answers
    are plain data (dicts, lists, numbers), so a worker whose engines come from another
    revision never sends the parent a class it does not have."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and closes us
    signal.signal(signal.SIGTERM, _interrupted)  # the parent was interrupted mid-case
    busy.root_pid = os.getppid()  # the parent's process tree is mibench's own
    pool = EnginePool(factory)
    handlers = {
        "info": lambda: _info(pool.get(key)),
        "case": lambda case, peak, paced=False: _case(conn, pool, _bound(case, key), peak,
                                                      paced),
        "score": lambda args, kwargs: dataclasses.asdict(pool.get(key).score(*args,
                                                                             **kwargs)),
        "encode": lambda text: pool.get(key).encode(text),
        "resolved": lambda mode, options: pool.get(key).resolved_options(mode, options),
        "env": _env,
    }
    while True:
        try:
            op, *args = conn.recv()
        except (EOFError, Interrupted):  # the parent is gone, or stopping
            return
        if op == "close":
            return
        try:
            conn.send(("done", handlers[op](*args)))
        except Exception as e:
            conn.send(("error", ErrorInfo(type=type(e).__name__, message=str(e),
                                          traceback=traceback.format_exc())))


def _interrupted(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the record is on its way
    raise Interrupted("the run was interrupted (Ctrl-C or SIGTERM) during this case; what "
                      "it measured before is kept, and `mibench run --resume` measures it "
                      "again")


def _case(conn, pool: EnginePool, case, peak: float | None, paced: bool) -> dict:
    """Measure a case here. Paced (`mibench ab` interleaving two workers call by call), the
    worker waits for the parent's `("go",)` before its first call and after each call, so
    only one side runs at a time and the sides' calls alternate."""

    def go() -> None:
        if not paced:
            return
        message = conn.recv()
        if message == ("close",):  # the parent gave up on this side mid-case
            raise SystemExit(0)
        if message != ("go",):
            raise RuntimeError(f"paced worker: expected ('go',) from the parent, got {message}")

    def tick(label: str) -> None:
        conn.send(("tick", label))
        go()

    def measuring() -> None:
        conn.send(("measuring",))
        go()

    return run_case(case, pool, lambda dtype: peak, tick, measuring).model_dump()


def _bound(case, key: EngineKey):
    """A launched server's case at the address this worker's engine was built with (the
    parent bound the worker's key: harness/under_test/pool.py)."""
    return kind_of(case.engine).bound(case, key)


def _info(engine) -> EngineInfo:
    return EngineInfo(name=engine.name, model=engine.model, dtype=engine.dtype, tp=engine.tp,
                      modes=tuple(engine.modes),
                      model_config=dataclasses.asdict(engine.model_config),
                      topology=dict(engine.topology), special_ids=frozenset(engine.special_ids))


def _env() -> dict:
    from mibench.engines import env_info

    return env_info()

"""Engine workers: each engine group runs in its own spawned process, so a segfault, an
out-of-memory kill, a hang inside native code or a memory blow-up ends that worker, not
the run.

The protocol is a pipe of tuples. The parent sends `(op, *args)`; the worker answers
`("tick", label)` while a case runs, `("measuring",)` when its timed loop starts, then
`("done", value)` or `("error", ErrorInfo)`. Ops: `info` (engine facts), `case`
(measure a case in the worker: `run_case`, so the timed loop never crosses the pipe; a
paced case waits for `("go",)` before each call, see `_case`),
`score`, `encode`, `resolved`, `close`. The worker's side (`serve`, `_case`) is
harness/run/worker_loop.py; this module is the parent's. The parent watches the worker
between messages: a worker that exits or is killed, passes `max_rss`, or runs past the
case's timeout is killed and the request fails with `WorkerDied` naming the cause and the
worker's last output. The engine stays loaded (and compiled) across the group's cases.

A run interrupted mid-case (Ctrl-C, SIGTERM) keeps what the case measured: the parent
sends its worker SIGTERM, which raises `Interrupted` in the case, whose kind turns it into
a failed record of what came before (a capacity search's steps, a load's answered
requests), sent back as usual (`Worker.interrupt`, at most INTERRUPT_WAIT_S).
"""

from __future__ import annotations

import copy
import functools
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

from mibench import errors

from ..config.keys import EngineKey
from ..host.children import OUTPUT_TAIL, POLL_S, Child, WorkerDied
from ..records import CaseRecord, ErrorInfo
from ..util import tail_of
from .pool import EnginePool
from .worker_loop import EngineInfo

GRACE_S = 5.0  # past the case's timeout, time the worker's own alarm has to fire first
INTERRUPT_WAIT_S = 20.0  # an interrupted case's time to send what it measured


def remote_error(info: ErrorInfo) -> Exception:
    """The worker's exception as the parent's: mibench's own classes keep their type (a
    skipped topology stays skipped); anything else is a RuntimeError naming its type."""
    cls = getattr(errors, info.type, None)
    if isinstance(cls, type) and issubclass(cls, errors.MibenchError):
        return cls(info.message)
    return RuntimeError(f"{info.type}: {info.message}")


class Worker(Child):
    """One worker for one engine (key: engine, model, dtype, tp): a `Child` process
    (host/children.py) serving run/worker_loop.py's `serve`."""

    def __init__(self, key: EngineKey, factory: Callable | None = None,
                 max_rss: int | None = None, engine_root: str | None = None):
        self.key, self.max_rss = key, max_rss
        super().__init__([engine_root or ""], "mibench-worker-")
        self.conn.send((key, factory))
        self.dead: str | None = None
        self.timeout_s: float | None = None
        self.deadline: float | None = None

    def request(self, op: str, *args, timeout_s: float | None = None,
                on_tick: Callable[[str], None] = lambda label: None):
        """Send one request and wait for its answer, watching the worker meanwhile.
        `timeout_s` counts from the start of the case's timed loop (`measuring`)."""
        self.send(op, *args, timeout_s=timeout_s)
        while True:
            kind, payload = self.next_event()
            if kind == "done":
                return payload
            if kind == "tick":
                on_tick(payload)

    def send(self, op: str, *args, timeout_s: float | None = None) -> None:
        if self.dead:
            raise WorkerDied(self.dead)
        self.conn.send((op, *args))
        self.timeout_s, self.deadline = timeout_s, None

    def go(self) -> None:
        """Let a paced worker make its next call."""
        self.conn.send(("go",))

    def next_event(self) -> tuple[str, object]:
        """The worker's next message, ("measuring", None), ("tick", label) or ("done",
        answer), watching the worker meanwhile; an error answer or a death is raised."""
        while True:
            if self.conn.poll(POLL_S):
                kind, *payload = self._receive()
                if kind == "measuring":
                    t = self.timeout_s
                    self.deadline = time.monotonic() + t + GRACE_S if t else None
                    return kind, None
                if kind in ("tick", "done"):
                    return kind, payload[0]
                raise remote_error(payload[0])
            self._watch(self.max_rss)
            if self.deadline is not None and time.monotonic() > self.deadline:
                self._fail(f"case exceeded runs.timeout_s={self.timeout_s:g} (the worker did "
                           "not return to Python: a hang in native code)")

    def _fail(self, cause: str):
        self.kill()
        self.dead = cause
        tail = self.output_tail()
        raise WorkerDied(cause + (f"; its last output: {tail}" if tail else ""))

    def output_tail(self) -> str:
        return tail_of(self.log, OUTPUT_TAIL)

    def interrupt(self, wait_s: float = INTERRUPT_WAIT_S) -> dict | None:
        """Stop the case this worker measures (SIGTERM raises `Interrupted` in it) and wait
        up to `wait_s` for its record of what it measured; None when none came."""
        if self.dead or self.proc.poll() is not None:
            return None
        os.kill(self.proc.pid, signal.SIGTERM)
        end = time.monotonic() + wait_s
        while (left := end - time.monotonic()) > 0:
            if not self.conn.poll(min(left, 0.2)):
                if self.proc.poll() is not None:
                    return None
                continue
            try:
                kind, *payload = self.conn.recv()
            except (EOFError, OSError):
                return None
            if kind == "done":
                return payload[0]
            if kind == "error":
                return None
        return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None and not self.dead:
            try:
                self.conn.send(("close",))
                self.proc.wait(10.0)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        self.conn.close()
        Path(self.log).unlink(missing_ok=True)


class RemoteEngine:
    """An engine in a worker, seen from the parent: the engine contract over the pipe
    (parity scores through it; cases are measured inside the worker, never through it)."""

    def __init__(self, worker: Worker):
        self.worker = worker
        info: EngineInfo = worker.request("info")
        self.name, self.model, self.dtype, self.tp = info.name, info.model, info.dtype, info.tp
        self.modes, self.model_config = info.modes, SimpleNamespace(**info.model_config)
        self.topology, self.special_ids = info.topology, info.special_ids

    def encode(self, text: str) -> list[int]:
        return self.worker.request("encode", text)

    def resolved_options(self, mode: str, options: dict) -> dict:
        return self.worker.request("resolved", mode, options)

    def score(self, *args, **kwargs):
        from mibench.engines import ScoreResult

        return ScoreResult(**self.worker.request("score", args, kwargs))

    def run_case(self, case, peak: float | None, tick: Callable[[str], None]) -> CaseRecord:
        """Measure `case` inside the worker (its own timed loop), under the case's memory
        cap and timeout."""
        self.start_case(case, peak)
        while True:
            kind, payload = self.next_event()
            if kind == "done":
                return CaseRecord.model_validate(payload)
            if kind == "tick":
                tick(payload)

    # paced stepping (`mibench ab` interleaving two revisions call by call: ab/interleave.py)
    def start_case(self, case, peak: float | None, paced: bool = False) -> None:
        """Start measuring `case` in the worker, under the case's memory cap and timeout;
        paced, the worker waits for `go()` before its first call and after each call."""
        self.worker.max_rss = case.runs.max_rss
        self.worker.send("case", case, peak, paced, timeout_s=case.runs.timeout_s)

    def next_event(self) -> tuple[str, object]:
        """The case's next event: ("measuring", None) before its first timed call, ("tick",
        label) after each call, ("done", record dict); a failure or death is raised."""
        return self.worker.next_event()

    def go(self) -> None:
        """Let a paced case make its next call."""
        self.worker.go()

    def close(self) -> None:
        self.worker.close()


class WorkerPool(EnginePool):
    """Engines in worker processes: `get` gives a RemoteEngine (a fresh worker after one
    died); `max_rss` applies to the workers' resident sets. `exclusive`: one JAX worker at
    a time (it owns the accelerator); `fresh_per_case`: each JAX case in a worker that has
    measured nothing before (`fresh`), so the device peak it reports is the case's own."""

    def __init__(self, factory: Callable | None = None, engine_root: str | None = None,
                 exclusive: bool = False, bind: Callable | None = None,
                 fresh_per_case: bool = False):
        super().__init__(bind=bind)
        self.engine_factory, self.engine_root = factory, engine_root
        self.exclusive = exclusive
        self.fresh_per_case = fresh_per_case
        self._spawned: dict[EngineKey, Worker] = {}
        self._measured: set[EngineKey] = set()  # keys whose worker has measured a case

    def fresh(self, key: EngineKey, force: bool = False) -> None:
        """Before a case of `key`: its worker is replaced when it has measured a case and
        the pool gives every JAX case a fresh one (or when `force`d: `runs.processes`)."""
        if force or (self.fresh_per_case and key.is_jax and key in self._measured):
            self.discard(key)
        self._measured.add(key)

    def discard(self, key: EngineKey) -> None:
        self._measured.discard(key)
        super().discard(key)

    def interrupted(self, key: EngineKey) -> CaseRecord | None:
        """What the case `key`'s worker was measuring when the run was interrupted, as its
        record (`Worker.interrupt`); None when it sent none."""
        engine = self._engines.get(key)
        payload = engine.worker.interrupt() if engine is not None else None
        return CaseRecord.model_validate(payload) if payload else None

    def spawn(self, key: EngineKey) -> None:
        """Start the worker of `key` without waiting for it (`get` then waits): two pools'
        workers start side by side (`mibench ab`)."""
        bound = self.bind(key)
        if key not in self._engines and bound not in self._spawned:
            self._spawned[bound] = Worker(bound, self.engine_factory,
                                          engine_root=self.engine_root)

    def _build(self, key: EngineKey) -> RemoteEngine:
        """A worker for `key` (bound: a launched server's live address in it)."""
        if self.exclusive and key.is_jax:
            for other in [k for k in self._engines if k.is_jax]:
                self.discard(other)
        worker = self._spawned.pop(key, None) or Worker(key, self.engine_factory,
                                                        engine_root=self.engine_root)
        return RemoteEngine(worker)

    def close(self) -> None:
        for worker in self._spawned.values():
            worker.close()
        self._spawned.clear()
        super().close()


def probe_env() -> dict:
    """JAX's devices as a fresh process sees them, so the parent never starts a backend
    (on an accelerator the worker that scores must own the device). Asked once per
    process and device environment (`XLA_*`, `JAX_*`, `CUDA_*`, `TPU_*` variables)."""
    device_vars = tuple(sorted((k, v) for k, v in os.environ.items()
                               if k.startswith(("XLA_", "JAX_", "CUDA_", "TPU_"))))
    return copy.deepcopy(_probe(device_vars))


@functools.cache
def _probe(device_vars: tuple) -> dict:
    worker = Worker(EngineKey("probe", "", "", 1))
    try:
        return worker.request("env")
    finally:
        worker.close()

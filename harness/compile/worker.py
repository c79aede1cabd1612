"""The compile worker of `mibench compile` and `mibench ab --target`: a fresh interpreter
(`python -m mibench.harness.run.bootstrap FD ROOT compile`, so it may import another
revision's engines) with libtpu in its environment, answering (case, target) requests
with the case's compiled programs (`mibench.engines.compile_case` on an `abstract_engine`),
and `CompileWorker`, its parent's side, which watches it: a worker that dies (a compiler
crash, a memory kill) or passes `runs.timeout_s` / `runs.max_rss` raises WorkerDied.
"""

from __future__ import annotations

import subprocess
import time
import traceback
from multiprocessing.connection import Connection
from pathlib import Path

from mibench.errors import MibenchError, TopologyUnavailable

from ..config.cases import CaseSpec
from ..host.children import OUTPUT_TAIL, POLL_S, Child, WorkerDied
from ..records import ErrorInfo
from ..records.compile import CaseCompile, CompileCase, CompileTarget
from ..util import now, tail_of
from . import libtpu

OUT_OF_MEMORY = "RESOURCE_EXHAUSTED"


def case_base(case: CaseSpec, status: str = "ok") -> CompileCase:
    return CompileCase(**CompileCase.head_of(case), status=status, started_at=now())


def compile_one(case: CaseSpec, target: CompileTarget) -> CompileCase:
    """Compile one case in this process (a worker with libtpu): never raises."""
    from mibench.engines import MODES, TextBound, abstract_engine, compile_case
    from mibench.workloads import materialize

    from ..records.metrics import useful_flops
    from .roofline import case_bound

    rec = case_base(case)
    start = time.perf_counter()
    try:
        engine = abstract_engine(case.model, case.dtype, case.tp, target.name)
        rec.topology = rec.topology.with_engine(engine.topology)
        w = case.workload
        requests = materialize(w, engine.model_config.vocab_size, exclude=engine.special_ids,
                               tokenize=TextBound.of(engine))
        out = compile_case(engine, [(r.query, r.items) for r in requests],
                           list(w.label_token_ids), case.mode, apply_softmax=w.apply_softmax,
                           delimiter=w.delimiter, options=case.params,
                           semantics=getattr(w, "semantics", None))
    except TopologyUnavailable as e:
        rec.status, rec.error = "skipped", ErrorInfo(type=type(e).__name__, message=str(e),
                                                     traceback="")
        return rec
    except MibenchError as e:  # the engine refused the case: its one-line message
        rec.status, rec.error = "failed", ErrorInfo(type=type(e).__name__, message=str(e),
                                                    traceback="")
        return rec
    except Exception as e:
        rec.status = "failed"
        rec.error = ErrorInfo(type=type(e).__name__, message=_one_line(f"{e}"),
                              traceback=traceback.format_exc())
        return rec
    rec.resolved = out["resolved"]
    rec.compile = summarize(out, target, time.perf_counter() - start)
    c = rec.compile
    c.useful_flops_per_pass = useful_flops(
        engine.model_config, requests, w.delimiter, len(w.label_token_ids), w.apply_softmax)
    if c.flops_unrolled_per_pass and c.useful_flops_per_pass:
        chips = len(rec.topology.devices or []) or case.tp
        c.flops_ratio = chips * c.flops_unrolled_per_pass / c.useful_flops_per_pass
    c.roofline = case_bound(MODES["jax"][case.mode], case.params, requests, w,
                            engine.model_config, case.dtype, target)
    if out["failed"]:
        f = out["failed"]
        rec.status = "failed"
        rec.error = ErrorInfo(type="CompileError", message=f"{f['program']}: {f['message']}",
                              traceback="")
    return rec


def summarize(out: dict, target: CompileTarget, wall_s: float) -> CaseCompile:
    """The case's compile section from `compile_case`'s plain data."""
    programs = out["programs"]
    sized = [p for p in programs if p.get("memory")]
    peak = max(sized, key=lambda p: p["memory"]["resident_bytes"], default=None)
    hbm = target.hbm_per_chip_bytes
    fits = None
    if out["failed"] and OUT_OF_MEMORY in out["failed"]["message"]:
        fits = False
    elif peak is not None and not out["failed"]:
        fits = peak["memory"]["resident_bytes"] <= hbm

    def per_pass(key):
        values = [p["calls_per_pass"] * p[key] for p in sized if p.get(key) is not None]
        return float(sum(values)) if values else None

    def all_per_pass(key):  # None unless every called program has it
        called = [p for p in sized if p["calls_per_pass"]]
        if not called or any(p.get(key) is None for p in called):
            return None
        return float(sum(p["calls_per_pass"] * p[key] for p in called))

    return CaseCompile(
        programs=programs, hbm_per_chip_bytes=hbm, fits=fits,
        hbm_peak_bytes=peak["memory"]["resident_bytes"] if peak else None,
        hbm_peak_program=f"{peak['name']}({peak['signature']})" if peak else None,
        flops_per_pass=per_pass("flops"), bytes_accessed_per_pass=per_pass("bytes_accessed"),
        flops_unrolled_per_pass=all_per_pass("flops_unrolled"),
        compile_s=sum(p["compile_s"] for p in programs), wall_s=wall_s, host=out["host"])


def _one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())[:2000]


def serve(conn: Connection) -> None:
    """The compile worker's loop (started by `harness.run.bootstrap ... compile`, which
    chose the engines first): answer (case, target) requests until None or EOF."""
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        case, target = request
        conn.send(compile_one(case, CompileTarget.model_validate(target)).model_dump())


class CompileWorker(Child):
    """A compile worker process (a `Child`, host/children.py; libtpu loaded through its
    environment); `compile(case)` waits for the answer while watching the process."""

    role = "compile worker"

    def __init__(self, env: dict[str, str], engine_root: str = ""):
        super().__init__([engine_root, "compile"], "mibench-compile-", env=env)

    def compile(self, case: CaseSpec, target: CompileTarget) -> CompileCase:
        self.conn.send((case, target.model_dump()))
        timeout, cap = case.runs.timeout_s, case.runs.max_rss
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            if self.conn.poll(POLL_S):
                return CompileCase.model_validate(self._receive())
            self._watch(cap)
            if deadline is not None and time.monotonic() > deadline:
                self._fail(f"compiling exceeded runs.timeout_s={timeout:g}")

    def _fail(self, cause: str):
        if self.proc.poll() is None:
            self.proc.kill()
        self.close()
        raise WorkerDied(cause + (f"; its last output: {self.tail}" if self.tail else ""))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.conn.send(None)
                self.proc.wait(10.0)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
        self.proc.wait()
        self.tail = tail_of(self.log, OUTPUT_TAIL)
        self.conn.close()
        Path(self.log).unlink(missing_ok=True)


def worker_env(lib, unrolled: bool = False) -> dict[str, str]:
    """libtpu's environment for a compile worker. Compile-only devices touch no chip, so
    libtpu's one-process-per-host lockfile (/tmp/libtpu_lockfile) is waived: two compiles
    at once (two terminals, the test suite) would otherwise fail every case of the second.
    `unrolled` (`mibench compile --unrolled`) goes to the engines through their variable,
    which every revision's `compile_case` reads (older ones default it on: it is set
    either way)."""
    from mibench.engines import UNROLLED_ENV

    return {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1", **libtpu.worker_env(lib),
            UNROLLED_ENV: "1" if unrolled else "0"}

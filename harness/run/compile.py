"""`mibench compile CONFIG --target v6e-4`: every JAX case of a config compiled for a TPU
slice by the real TPU compiler (libtpu), without a TPU and without weights.

The parent loads and expands the config (every bad input is exit 2 before anything
starts), finds libtpu (`harness.run.libtpu`), then sends the JAX cases of each engine group
(model, dtype, tp) to a compile worker, a fresh interpreter that loads libtpu and compiles
the engine's programs for the target's compile-only devices
(`mibench.engines.compile_case`). A worker that dies (a compiler crash, a memory kill) or
passes `runs.timeout_s` / `runs.max_rss` fails its case, and the next case gets a fresh
worker. Torch cases are `skipped` (not a JAX program); so is a case whose tp exceeds the
target's chips. The artifact (`mibench.compile/1`, `compile_records`) is rewritten after
every case. Exit 0: every case ok or skipped; 3: a case failed.
"""

from __future__ import annotations

import datetime as dt
import secrets
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from mibench.errors import MibenchError, TopologyUnavailable
from mibench.harness.config.matrix import CaseSpec, expand
from mibench.harness.records import Devices, ErrorInfo, locked, write_artifact
from mibench.harness.run import libtpu
from mibench.harness.run.compile_records import (
    CaseCompile,
    CompileCase,
    CompileRecord,
    CompileTarget,
    LibTpu,
)
from mibench.harness.run.worker import OUTPUT_TAIL, POLL_S, WorkerDied, _death, rss_of

GIB = 1024**3
# HBM per chip by TPU kind, from Google Cloud's TPU pages (their "GB" is binary: the
# compiler's own limit on a v5e is 15.75 GiB, a little under 16 GiB, some being reserved)
HBM_PER_CHIP: dict[str, tuple[int, str]] = {
    "v6e": (32 * GIB, "Google Cloud TPU v6e page: HBM capacity per chip 32 GB "
                      "(https://cloud.google.com/tpu/docs/v6e)"),
    "v5e": (16 * GIB, "Google Cloud TPU v5e page: HBM capacity per chip 16 GB "
                      "(https://cloud.google.com/tpu/docs/v5e)"),
    "v5p": (95 * GIB, "Google Cloud TPU v5p page: HBM2e capacity 95 GB per chip "
                      "(https://cloud.google.com/tpu/docs/v5p)"),
    "v4": (32 * GIB, "Google Cloud TPU v4 page: HBM2 capacity 32 GiB per chip "
                     "(https://cloud.google.com/tpu/docs/v4)"),
}
OUT_OF_MEMORY = "RESOURCE_EXHAUSTED"


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds")


def resolve_target(flag: str | None, config) -> CompileTarget:
    """The target of `--target`, else of the config's `topology.target`; one is required."""
    from mibench.engines import tpu_target

    name, field = (flag, "--target") if flag is not None else (config.topology.target,
                                                               "topology.target")
    if name is None:
        raise MibenchError("required: give a TPU slice such as v6e-1, v6e-4 or v5e-4 (or set "
                           "topology.target in the config)", field="--target")
    try:
        t = tpu_target(name)
    except MibenchError as e:
        raise MibenchError(str(e).removeprefix("target: "), field=field) from None
    hbm, source = HBM_PER_CHIP[t.kind]
    return CompileTarget(name=t.name, kind=t.kind, chips=t.chips, topology=t.topology,
                         hbm_per_chip_bytes=hbm, hbm_source=source)


def case_base(case: CaseSpec, status: str = "ok") -> CompileCase:
    return CompileCase(case_id=case.case_id, engine=case.engine, mode=case.mode,
                       params=dict(case.params), model={"path": case.model, "dtype": case.dtype},
                       topology={"tp": case.tp}, workload=case.workload.as_dict(),
                       status=status, started_at=now())


# ---- in the worker ----------------------------------------------------------------------


def compile_one(case: CaseSpec, target: CompileTarget) -> CompileCase:
    """Compile one case in this process (a worker with libtpu): never raises."""
    from mibench.engines import abstract_engine, compile_case
    from mibench.harness.stats.metrics import useful_flops
    from mibench.workloads import materialize

    rec = case_base(case)
    start = time.perf_counter()
    try:
        engine = abstract_engine(case.model, case.dtype, case.tp, target.name)
        rec.topology = {**rec.topology, **engine.topology}
        w = case.workload
        requests = materialize(w, engine.model_config.vocab_size, exclude=engine.special_ids,
                               tokenize=engine.encode)
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
        chips = len(rec.topology.get("devices") or []) or case.tp
        c.flops_ratio = chips * c.flops_unrolled_per_pass / c.useful_flops_per_pass
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


# ---- the parent -------------------------------------------------------------------------


class CompileWorker:
    """A compile worker process (libtpu loaded through its environment), its output in a
    log file; `compile(case)` waits for the answer while watching the process."""

    def __init__(self, env: dict[str, str], engine_root: str = ""):
        import socket

        fd, self.log = tempfile.mkstemp(prefix="mibench-compile-", suffix=".log")
        mine, theirs = socket.socketpair()
        with open(fd, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mibench.harness.run.bootstrap",
                 str(theirs.fileno()), engine_root, "compile"],
                pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        theirs.close()
        self.conn = Connection(mine.detach())

    def compile(self, case: CaseSpec, target: CompileTarget) -> CompileCase:
        self.conn.send((case, target.model_dump()))
        timeout, cap = case.runs.timeout_s, case.runs.max_rss
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            if self.conn.poll(POLL_S):
                try:
                    return CompileCase.model_validate(self.conn.recv())
                except (EOFError, OSError):
                    self._fail(_death(self._exitcode()))
            if self.proc.poll() is not None:
                self._fail(_death(self.proc.returncode))
            rss = rss_of(self.proc.pid) if cap else None
            if rss is not None and rss > cap:
                self._fail(f"the compile worker's resident set reached {rss / 2**20:.0f} MiB, "
                           f"past runs.max_rss = {cap / 2**20:.0f} MiB")
            if deadline is not None and time.monotonic() > deadline:
                self._fail(f"compiling exceeded runs.timeout_s={timeout:g}")

    def _exitcode(self):
        try:
            return self.proc.wait(1.0)
        except subprocess.TimeoutExpired:
            return None

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
        try:
            self.tail = Path(self.log).read_text(errors="replace").strip()[-OUTPUT_TAIL:]
        except OSError:
            self.tail = ""
        self.conn.close()
        Path(self.log).unlink(missing_ok=True)


def new_record(config, target: CompileTarget, lib, argv: list[str]) -> CompileRecord:
    from mibench.harness.run.provenance import collect

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    provenance = collect(argv, devices=Devices(platform="tpu", count=target.chips))
    provenance.packages["libtpu"] = lib.version if lib else None
    from mibench.engines import COST_LOOPS

    return CompileRecord(
        run_id=f"{config.name}-{target.name}-{stamp}-{secrets.token_hex(2)}",
        started_at=now(), config=config.resolved(), config_sha256=config.sha256(),
        target=target, cost_loops=COST_LOOPS, provenance=provenance,
        libtpu=LibTpu(version=lib.version, path=str(lib.path), source=lib.source) if lib
        else LibTpu(path="", source="not needed (no JAX case)"))


def compile_cases(cases: list[CaseSpec], target: CompileTarget, lib, *, engine_root: str = "",
                  on_case: Callable[[CompileCase], None] = lambda rec: None
                  ) -> list[CompileCase]:
    """Compile every case, one worker per engine group (a fresh one after a death), with
    the engines of `engine_root` (another revision's checkout, for `mibench ab`) or this
    checkout's; torch cases are `skipped`. Calls `on_case` as each case finishes."""
    done: list[CompileCase] = []
    worker, key = None, None
    try:
        for case in cases:
            if case.engine != "jax":
                rec = case_base(case, "skipped")
                rec.error = ErrorInfo(type="NotCompiled", traceback="",
                                      message=f"not a JAX program ({case.engine} engine)")
            else:
                if worker is not None and key != case.engine_key:
                    worker.close()
                    worker = None
                if worker is None:
                    worker = CompileWorker(worker_env(lib), engine_root)
                    key = case.engine_key
                try:
                    rec = worker.compile(case, target)
                except WorkerDied as e:
                    worker = None
                    rec = case_base(case, "failed")
                    rec.error = ErrorInfo(type="WorkerDied", message=str(e), traceback="")
            done.append(rec)
            on_case(rec)
    finally:
        if worker is not None:
            worker.close()
    return done


def compile_config(config_path: Path, out: Path, sets: list[str], target_flag: str | None,
                   argv: list[str]) -> int:
    """Load, compile every case, write the artifact, print a table; the exit code."""
    from mibench.harness.commands import writable_folder
    from mibench.harness.config import load_config

    config = load_config(config_path, sets)
    target = resolve_target(target_flag, config)
    cases = expand(config)
    writable_folder(out, "--out")
    jax_cases = [c for c in cases if c.engine == "jax"]
    lib = libtpu.find() if jax_cases else None
    record = new_record(config, target, lib, argv)
    path = Path(out) / f"{record.run_id}.json"
    print(header(record), flush=True)

    def done(rec: CompileCase) -> None:
        record.cases.append(rec)
        _device_kind(record, rec)
        write_artifact(record, path)
        print(row(rec), flush=True)

    with locked(path):
        write_artifact(record, path)
        compile_cases(cases, target, lib, on_case=done)
        record.finished_at = now()
        write_artifact(record, path)
    print(f"artifact: {path}")
    return 3 if any(c.status == "failed" for c in record.cases) else 0


def worker_env(lib) -> dict[str, str]:
    """libtpu's environment for a compile worker. Compile-only devices touch no chip, so
    libtpu's one-process-per-host lockfile (/tmp/libtpu_lockfile) is waived: two compiles
    at once (two terminals, the test suite) would otherwise fail every case of the second."""
    return {"ALLOW_MULTIPLE_LIBTPU_LOAD": "1", **libtpu.worker_env(lib)}


def _device_kind(record: CompileRecord, rec: CompileCase) -> None:
    devices = rec.topology.get("devices") or []
    if devices and record.target.device_kind is None:
        record.target.device_kind = devices[0].get("kind")
        record.provenance.devices.kind = record.target.device_kind


def gib(n: float | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f} GiB"


def header(record: CompileRecord) -> str:
    t = record.target
    lib = f"libtpu {record.libtpu.version}" if record.libtpu.version else record.libtpu.source
    return (f"compiling {record.config.get('name')} for {t.name} ({t.topology}, "
            f"{gib(t.hbm_per_chip_bytes)} HBM per chip; {lib})\n"
            f"{'status':8} {'HBM/chip':>10} {'fits':5} {'compile':>8}  case: peak program")


def row(rec: CompileCase) -> str:
    c = rec.compile
    if c is None:
        return f"{rec.status:8} {'-':>10} {'-':5} {'-':>8}  {rec.case_id}: {rec.error.message}"
    fits = {True: "yes", False: "NO", None: "-"}[c.fits]
    tail = rec.error.message if rec.error else c.hbm_peak_program
    return (f"{rec.status:8} {gib(c.hbm_peak_bytes):>10} {fits:5} {c.compile_s:7.1f}s  "
            f"{rec.case_id}: {tail}")

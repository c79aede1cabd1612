"""`mibench compile CONFIG --target v6e-4`: every JAX case of a config compiled for a TPU
slice by the real TPU compiler (libtpu), without a TPU and without weights.

The parent loads and expands the config (every bad input is exit 2 before anything starts),
finds libtpu (`harness.compile.libtpu`), then sends the JAX cases of each engine group (model,
dtype, tp) to a compile worker (`compile_worker`), a fresh interpreter that loads libtpu
and compiles the engine's programs for the target's compile-only devices
(`mibench.engines.compile_case`). A worker that dies (a compiler crash, a memory kill) or
passes `runs.timeout_s` / `runs.max_rss` fails its case, and the next case gets a fresh
worker. Torch cases are `skipped` (not a JAX program); so is a case whose tp exceeds the
target's chips. The artifact (`mibench.compile/2`, `compile_records`) is rewritten after
every case. Exit 0: every case ok or skipped; 3: a case failed."""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable

from mibench.errors import MibenchError

from ..config.matrix import CaseSpec
from ..host.children import WorkerDied
from ..records import Devices, ErrorInfo
from ..records.compile import (
    CompileCase,
    CompileRecord,
    CompileTarget,
    LibTpu,
)
from ..util import GIB, now
from .worker import (
    CompileWorker,
    case_base,
    worker_env,
)

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


# HBM bandwidth per chip by TPU kind (bytes/s), from the same pages; the peak bf16 FLOP/s is
# harness/host/peak.py's VENDOR table (the MXU's figure, which a float32 matmul also runs at)
HBM_BANDWIDTH: dict[str, tuple[float, str]] = {
    "v6e": (1638e9, "Google Cloud TPU v6e page: HBM bandwidth per chip 1638 GBps, peak "
                    "compute per chip (bf16) 918 TFLOPs (https://cloud.google.com/tpu/docs/v6e)"),
    "v5e": (819e9, "Google Cloud TPU v5e page: HBM2 capacity and bandwidth 16 GB, 819 GBps, "
                   "peak compute per chip (bf16) 197 TFLOPs (https://cloud.google.com/tpu/docs/v5e)"),
    "v5p": (2765e9, "Google Cloud TPU v5p page: HBM2e capacity and bandwidth 95 GB, 2765 GBps, "
                    "peak compute per chip (bf16) 459 TFLOPs (https://cloud.google.com/tpu/docs/v5p)"),
}
PEAK_KIND = {"v6e": "tpu v6", "v5e": "tpu v5e", "v5p": "tpu v5p"}  # -> peak.VENDOR's key


def resolve_target(flag: str | None, config) -> CompileTarget:
    """The target of `--target`, else of the config's `topology.target`; one is required."""
    from mibench.engines import tpu_target

    name, field = (flag, "--target") if flag is not None else (config.topology.target,
                                                               "topology.target")
    if name is None:
        raise MibenchError(f"required: config {config.name!r} names no topology.target; give "
                           "a TPU slice such as v6e-1, v6e-4 or v5e-4 (or set "
                           "topology.target in the config)", field="--target")
    try:
        t = tpu_target(name)
    except MibenchError as e:
        raise e.under(field, MibenchError) from None
    from ..host.peak import VENDOR

    hbm, source = HBM_PER_CHIP[t.kind]
    bandwidth, bw_source = HBM_BANDWIDTH[t.kind]
    return CompileTarget(name=t.name, kind=t.kind, chips=t.chips, topology=t.topology,
                         hbm_per_chip_bytes=hbm, hbm_source=source,
                         peak_flops_per_chip=VENDOR[PEAK_KIND[t.kind]]["bfloat16"],
                         peak_flops_source=bw_source, hbm_bandwidth_per_chip=bandwidth,
                         hbm_bandwidth_source=bw_source)


def new_record(config, target: CompileTarget, lib, argv: list[str]) -> CompileRecord:
    from ..host.provenance import collect

    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    provenance = collect(argv, devices=Devices(platform="tpu", count=target.chips))
    provenance.packages["libtpu"] = lib.version if lib else None
    from mibench.engines import COST_LOOPS

    from ..config.references import load_references

    return CompileRecord(
        run_id=f"{config.name}-{target.name}-{stamp}-{secrets.token_hex(2)}",
        started_at=now(), config=config.resolved(), config_sha256=config.sha256(),
        target=target, cost_loops=COST_LOOPS, provenance=provenance,
        references=load_references(config.references) if config.references else None,
        libtpu=LibTpu(version=lib.version, path=str(lib.path), source=lib.source) if lib
        else LibTpu(path="", source="not needed (no JAX case)"))


def compile_cases(cases: list[CaseSpec], target: CompileTarget, lib, *, engine_root: str = "",
                  on_case: Callable[[CompileCase], None] = lambda rec: None,
                  unrolled: bool = False,
                  on_start: Callable[[int, CaseSpec], None] = lambda i, case: None
                  ) -> list[CompileCase]:
    """Compile every case, one worker per engine group (a fresh one after a death), with
    the engines of `engine_root` (another revision's checkout, for `mibench ab`) or this
    checkout's; torch cases are `skipped`. Calls `on_start` (its number from 1, the case)
    as each case starts and `on_case` as it finishes.
    `unrolled`: also the FLOPs of every program with its scans unrolled (slow)."""
    done: list[CompileCase] = []
    worker, key = None, None
    try:
        for i, case in enumerate(cases, 1):
            on_start(i, case)
            if case.engine != "jax":
                rec = case_base(case, "skipped")
                rec.error = ErrorInfo(type="NotCompiled", traceback="",
                                      message=f"not a JAX program ({case.engine} engine)")
            else:
                if worker is not None and key != case.engine_key:
                    worker.close()
                    worker = None
                if worker is None:
                    worker = CompileWorker(worker_env(lib, unrolled), engine_root)
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


def note_device_kind(record: CompileRecord, rec: CompileCase) -> None:
    """The chip's name as the compiler gives it (the first case's devices), kept once."""
    devices = rec.topology.devices or []
    if devices and record.target.device_kind is None:
        record.target.device_kind = devices[0].kind
        record.provenance.devices.kind = record.target.device_kind


def hbm(n: float | None) -> str:
    """A column of HBM sizes: always GiB, two decimals."""
    return "-" if n is None else f"{n / GIB:.2f} GiB"


def header(record: CompileRecord) -> str:
    t = record.target
    lib = f"libtpu {record.libtpu.version}" if record.libtpu.version else record.libtpu.source
    return (f"compiling {record.config.get('name')} for {t.name} ({t.topology}, "
            f"{hbm(t.hbm_per_chip_bytes)} HBM per chip; {lib})\n"
            f"{'status':8} {'HBM/chip':>10} {'fits':5} {'compile':>8}  case: peak program")


def row(rec: CompileCase) -> str:
    c = rec.compile
    if c is None:
        return f"{rec.status:8} {'-':>10} {'-':5} {'-':>8}  {rec.case_id}: {rec.error.message}"
    fits = {True: "yes", False: "NO", None: "-"}[c.fits]
    tail = rec.error.message if rec.error else c.hbm_peak_program
    return (f"{rec.status:8} {hbm(c.hbm_peak_bytes):>10} {fits:5} {c.compile_s:7.1f}s  "
            f"{rec.case_id}: {tail}")

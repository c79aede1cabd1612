"""The compile artifact: schema `mibench.compile/2` (compile/1 artifacts still read), written
by `mibench compile` (one file per config and target). Its JSON Schema,
`harness/records/schemas/mibench.compile-2.schema.json`,
is generated from these models (`python -m mibench.harness.records`).

Bytes are per chip (what one device of the mesh holds); FLOPs and bytes accessed are XLA's
cost analysis of one call, which counts a loop body once (see `CompileRecord.cost_loops`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from .base import ErrorInfo, Header, Measured, Record
from .case import CaseHead
from .io import read_json, schema_file
from .references import ReferenceSet

# compile/2 adds, all optional: the target's peak FLOP/s and HBM bandwidth with their sources,
# each case's roofline bound, the config's reference figures; compile/1 reads as compile/2
COMPILE_SCHEMA = "mibench.compile/2"
COMPILE_OLDER = ("mibench.compile/1",)
COMPILE_SCHEMA_FILE = schema_file(COMPILE_SCHEMA)


class ProgramMemory(Record):
    """XLA's memory analysis of one compiled program, bytes per chip."""

    argument_bytes: int  # parameters and inputs (the weights are arguments of every program)
    output_bytes: int
    temp_bytes: int  # temporaries the program allocates while it runs
    alias_bytes: int  # outputs that reuse an argument's buffer (counted once)
    generated_code_bytes: int
    total_bytes: int  # arguments + outputs + temporaries - aliased
    # device arguments XLA dropped as unused (e.g. the layers' weights of the LM head
    # program), which stay on the chip: the engine holds every weight for the whole run
    dropped_argument_bytes: int = 0
    # other results the mode keeps on the chip while this program runs (the prefix KV cache
    # while the extend batches' LM head runs), the most over its calls
    held_bytes: int = 0
    # what the chip holds while the program runs: total + dropped arguments + held results
    resident_bytes: int


class ProgramRecord(Record):
    """One program a case runs: a jitted function of the engine at one set of shapes."""

    name: str  # the function's name, e.g. `extend`
    function: str  # its module path
    signature: str  # its array arguments, dtype[shape]
    calls_first_pass: int  # calls in the engine's first call (precompiles included)
    calls_per_pass: int  # calls in a steady-state pass (0: compiled on first use only)
    compile_s: float  # lowering and compiling, wall seconds
    error: str | None = None  # the compiler's message when it did not compile
    memory: ProgramMemory | None = None
    flops: Measured = None  # per call; loop bodies counted once
    transcendentals: Measured = None
    bytes_accessed: Measured = None  # per call; loop bodies counted once
    # per call and chip, the program compiled again with every lax.scan unrolled (every
    # layer counted); Pallas kernels' own FLOPs are not seen
    flops_unrolled: Measured = None
    # host (numpy) arrays handed to one call, by argument name
    host_to_device_bytes: dict[str, int] = {}


class HostTraffic(Record):
    """What one steady-state pass moves between the host and the chips."""

    to_device_bytes_per_pass: int
    to_device_by_argument: dict[str, int]  # `program.argument` -> bytes per pass
    to_host_bytes_per_pass: int  # results read back
    # wall time of the mode's host code in one pass on the compiling machine's CPU (layouts,
    # dense masks, request checks; no device work); null when a program failed
    host_s_per_pass: float | None = None


class Roofline(Record):
    """A physical bound on one case on its target: one pass's FLOPs and HBM bytes by
    mibench's formulas (`method`), spread over the chips at their peak bf16 FLOP/s and HBM
    bandwidth; the pass cannot take less than the larger of the two times, so `items_per_s`
    is an upper bound and `bound` names the resource that sets it. Communication between
    chips and the host link are not counted."""

    method: str  # how FLOPs and bytes were counted (every layer, not XLA's looped counts)
    flops_per_pass: float
    hbm_bytes_per_pass: float
    mask_bytes_per_pass: float = 0.0  # host->device bytes of a host-built mask, per pass
    chips: int
    compute_s: float  # flops / (chips x peak FLOP/s)
    memory_s: float  # bytes / (chips x HBM bandwidth)
    items: int  # items one pass scores
    items_per_s: float  # items / max(compute_s, memory_s)
    bound: Literal["compute", "memory"]


class CaseCompile(Record):
    """Everything compiled for one case."""

    programs: list[ProgramRecord]
    hbm_peak_bytes: int | None = None  # the largest program's resident_bytes, per chip
    hbm_peak_program: str | None = None  # `name` and signature of that program
    hbm_per_chip_bytes: int  # the target chip's HBM (CompileTarget.hbm_source)
    fits: bool | None = None  # peak <= HBM per chip; false when the compiler ran out of HBM
    flops_per_pass: Measured = None  # sum of calls_per_pass x flops (loops once)
    bytes_accessed_per_pass: Measured = None
    useful_flops_per_pass: Measured = None  # the analytic minimum (records/metrics.py)
    flops_unrolled_per_pass: Measured = None  # sum of calls_per_pass x flops_unrolled
    # chips x flops_unrolled_per_pass / useful_flops_per_pass: far above 1 is wasted work
    # (padding, masked-out attention, full-vocabulary heads, work replicated over chips)
    flops_ratio: Measured = None
    compile_s: float  # all its programs
    wall_s: float  # the whole case: layouts, lowering, compiling
    host: HostTraffic | None = None
    roofline: Roofline | None = None  # the case's bound on the target (artifacts before: none)


class CompileCase(CaseHead):
    # `resolved`: the options as they resolve on the target, e.g. attention: pallas
    status: Literal["ok", "failed", "skipped"]
    error: ErrorInfo | None = None
    started_at: str
    compile: CaseCompile | None = None


class CompileTarget(Record):
    name: str  # e.g. v6e-4
    kind: str  # v6e, v5e, v5p
    chips: int
    topology: str  # the topology JAX compiled for, e.g. v6e:2x2
    hbm_per_chip_bytes: int
    hbm_source: str
    device_kind: str | None = None  # as the compiler names the chip, e.g. "TPU v6 lite"
    # the chip's public peaks, for the roofline (artifacts before them: none)
    peak_flops_per_chip: float | None = None  # bf16 (the MXU's), FLOP/s
    peak_flops_source: str | None = None
    hbm_bandwidth_per_chip: float | None = None  # bytes/s
    hbm_bandwidth_source: str | None = None


class LibTpu(Record):
    version: str | None = None
    path: str  # the libtpu.so loaded
    source: str  # MIBENCH_LIBTPU, installed package, cache, installed now


class CompileRecord(Header):
    schema_: Literal["mibench.compile/2"] = Field(default=COMPILE_SCHEMA, alias="schema")
    target: CompileTarget
    libtpu: LibTpu
    cost_loops: str  # how XLA's cost analysis counts loops
    cases: list[CompileCase] = []
    # the config's reference figures (`references:`), set beside the roofline by `report`
    references: ReferenceSet | None = None


def read_compile_artifact(path: str | Path) -> CompileRecord:
    """Read and validate a compile artifact; every unreadable input is one MibenchError."""
    return read_json(path, CompileRecord, COMPILE_SCHEMA, older=COMPILE_OLDER)

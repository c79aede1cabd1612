"""The engine's programs compiled for a TPU topology without a TPU (`mibench compile`).

`abstract_engine(...)` (engines/tpu.py) builds a JAX engine from the model's shapes alone
(no weights generated or loaded: every parameter is a `jax.ShapeDtypeStruct` with the
sharding the real engine gives it on the target's mesh); `compile_case(engine, ...)` scores
the requests through the engine's own code path (`JaxEngine.score`, the mode's scorer, its
host layouts and dense masks) twice. Every call of a jitted program of the modes
(`prefill`, `extend`, `score_rows`, `score_last_token`, `packed_*_forward`, whatever a mode
runs) is intercepted: its arguments become abstract, the program is lowered and compiled by
the TPU compiler of `libtpu` for compile-only devices of the topology
(`jax.experimental.topologies`), and the call returns a placeholder with the program's
output shapes and shardings, which the scorer's host code carries on as it would a result.
So the programs compiled are exactly those the mode runs, with the same shapes, static
arguments and shardings; there is no second model.

The first pass is the engine's first call (it also compiles what a mode precompiles, e.g.
every `precompile_bs` batch size); the second pass is a steady-state call and gives the
calls per pass. Host work is counted at the program boundary: bytes of host (numpy) arrays
handed to a program (the dense mask among them) and bytes of results read back; and the
second pass's wall time is the mode's host code (layouts, masks, request checks) on this
CPU, plus the interception's own small cost, since it compiles and runs nothing.

libtpu must be loadable: `TPU_LIBRARY_PATH` naming its `libtpu.so`, or an importable
`libtpu` package. The process should run with `JAX_PLATFORMS=cpu` (JAX's default backend
stays the CPU; only these compile-only devices are TPUs), and nothing here executes a
program. Importing this module is light (no jax); the target table is plain data.
"""

from __future__ import annotations

import os
import time

from .programs import Program, ProgramFailed, Recorder

COST_LOOPS = ("XLA's cost analysis counts a loop body once, not once per iteration: the "
              "layers run in one lax.scan (and attention tiles in inner loops), so flops and "
              "bytes_accessed cover one layer's body plus the code outside loops")
# `compile_case(unrolled=None)` reads this (1: yes) so that a compile worker running another
# revision's engines gets the choice too (`mibench compile --unrolled`; default off: the
# second, unrolled compile of every program takes many times as long as the first)
UNROLLED_ENV = "MIBENCH_COMPILE_UNROLLED"


# ---- one case -------------------------------------------------------------------------------


def _memory(program: Program) -> dict:
    m = program.compiled.memory_analysis()
    out = {"argument_bytes": int(m.argument_size_in_bytes),
           "output_bytes": int(m.output_size_in_bytes),
           "temp_bytes": int(m.temp_size_in_bytes),
           "alias_bytes": int(m.alias_size_in_bytes),
           "generated_code_bytes": int(m.generated_code_size_in_bytes)}
    out["total_bytes"] = (out["argument_bytes"] + out["output_bytes"] + out["temp_bytes"]
                          - out["alias_bytes"])
    out["dropped_argument_bytes"] = program.dropped_bytes
    out["held_bytes"] = program.held_bytes
    out["resident_bytes"] = out["total_bytes"] + program.dropped_bytes + program.held_bytes
    return out


def _cost(compiled) -> dict:
    cost = compiled.cost_analysis()
    if isinstance(cost, list | tuple):  # older jax: one dict per partition
        cost = cost[0] if cost else {}
    cost = cost or {}

    def get(key):
        v = cost.get(key)
        return float(v) if v is not None else None

    return {"flops": get("flops"), "transcendentals": get("transcendentals"),
            "bytes_accessed": get("bytes accessed")}


def compile_case(engine, requests: list, labels: list, mode: str,
                 apply_softmax: bool = False, delimiter: int | None = None,
                 options: dict | None = None, semantics: str | None = None,
                 unrolled: bool | None = None) -> dict:
    """Compile every program `mode` runs for `requests` ((query, items) pairs of token ids)
    on an `abstract_engine` (see the module doc). Returns plain data: `programs` (each with
    memory per chip, cost per call, calls per pass, compile time), `resolved` (the options
    as they resolve on the target), `topology`, the host traffic of a pass, and `failed`:
    None, or the program that did not lower or compile with the compiler's one-line
    message (the programs before it are listed). Anything the engine refuses (a bad option,
    an attention path the target cannot run) raises its MibenchError. `unrolled`: also
    compile every program with its scans unrolled, for `flops_unrolled` (slow; None: the
    `UNROLLED_ENV` environment variable, off unless it is 1)."""
    options = dict(options or {})
    call = dict(mode=mode, apply_softmax=apply_softmax, delimiter=delimiter, **options)
    if semantics is not None:
        call["semantics"] = semantics
    import jax

    jax.clear_caches()  # every case compiles its programs itself: honest compile times
    if unrolled is None:  # the harness's workers say it in their environment
        unrolled = os.environ.get(UNROLLED_ENV, "0") == "1"
    recorder = Recorder(unrolled)
    failed, host_s = None, None
    with recorder.intercepting():
        try:
            for k in range(2):  # the first call, then a steady-state call
                recorder.pass_index = k
                before, start = recorder.to_host_bytes, time.perf_counter()
                for query, items in requests:
                    engine.score(list(query), [list(i) for i in items], list(labels),
                                 **call)
                recorder.to_host_by_pass[k] = recorder.to_host_bytes - before
                host_s = time.perf_counter() - start  # the second pass compiles nothing
        except ProgramFailed as e:
            failed = {"program": e.program, "message": e.message}
    programs = []
    for p in recorder.programs.values():
        entry = {"name": p.name, "function": p.function, "signature": p.signature,
                 "calls_first_pass": p.calls[0], "calls_per_pass": p.calls[1],
                 "compile_s": p.compile_s, "host_to_device_bytes": p.host_args,
                 "error": p.error, "flops_unrolled": p.flops_unrolled}
        if p.compiled is not None:
            entry.update(memory=_memory(p), **_cost(p.compiled))
        programs.append(entry)
    to_device: dict[str, int] = {}
    for p in recorder.programs.values():
        for arg, nbytes in p.host_args.items():
            key = f"{p.name}.{arg}"
            to_device[key] = to_device.get(key, 0) + nbytes * p.calls[1]
    return {"programs": programs, "failed": failed,
            "resolved": engine.resolved_options(mode, options), "topology": engine.topology,
            "host": {"to_device_bytes_per_pass": sum(to_device.values()),
                     "to_device_by_argument": to_device,
                     "to_host_bytes_per_pass": recorder.to_host_by_pass[1],
                     "host_s_per_pass": host_s if failed is None else None},
            "cost_loops": COST_LOOPS}

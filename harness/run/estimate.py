"""How long a config's cases take on this machine at the least, before anything runs
(`validate`, and `run` before its first case), and the one-line warning when a config made
for another machine would take hours here.

A case's estimate is a **lower bound**: the FLOPs of one pass (the mode's formulas,
engines/modes/work.py, the same the roofline of `mibench compile` uses; a torch case: the
JAX mode of its name) times the engine
calls of the case (`processes x (1 + warmup + timed)`), divided by this machine's peak
FLOP/s in the case's dtype (the CPU's matmul calibration as cached by `harness/host/peak.py`;
never measured here, so validate stays quick). Compiling, parity checks, memory traffic and
http cases (a server's load) are not counted; an engine runs at a fraction of the peak, so
the real time is longer, often several times. With no cached peak (or on a machine with a
TPU or GPU, whose peak only a started JAX can name) there is no estimate: "unknown".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..case_kinds import kind_of

WARN_S = 3600.0  # a config whose bound passes this gets the warning line
HOW = ("a lower bound: each pass's FLOPs x its calls / the measured peak; compiling, "
       "parity and http cases not counted")


@dataclasses.dataclass(frozen=True)
class CaseEstimate:
    """One case: its seconds at the least, or None and why not."""

    case_id: str
    seconds: float | None
    why: str | None = None  # why there is no estimate


def case_calls(case) -> int:
    """The engine calls of a case: each process's first call, warmups and timed runs."""
    return case.runs.processes * (1 + case.runs.warmup + case.runs.timed)


def pass_flops(case, facts: Callable[[str], object]) -> tuple[float | None, str | None]:
    """(FLOPs of one pass of the case's generated request, None) or (None, why not);
    `facts`: a model spec's ModelConfig (engines.model_facts)."""
    from mibench.engines import MODES, MibenchError, Shape

    w = case.workload
    mode = MODES.get(case.engine, {}).get(case.mode)
    why = kind_of(case.engine).flops_unknown(case)
    if why is not None or mode is None:
        return None, why or "a server's case"
    if w.requests or not w.query_tokens or not w.num_items:
        return None, "a requests file"
    items = w.item_tokens
    mean, longest = ((items.min + items.max) / 2, items.max) if hasattr(items, "max") \
        else (items, items)
    try:
        semantics = mode.resolve_semantics(w.semantics, w.delimiter)
        shape = Shape(w.query_tokens + (semantics == "delimited"), w.num_items, mean,
                      longest=longest, model=facts(case.model), dtype=case.dtype,
                      head_cols=len(w.label_token_ids) if w.apply_softmax else None)
        work = mode.work_per_pass(shape, case.params)
        if work is None and case.engine != "jax" and case.mode in MODES["jax"]:
            # a reference engine's mode computes what the JAX mode of its name does
            work = MODES["jax"][case.mode].work_per_pass(shape, case.params)
    except MibenchError as e:
        return None, f"no FLOP count ({e.message})"
    if work is None or work.flops <= 0:
        return None, "no FLOP formula for this mode"
    return work.flops, None


def estimate(cases: list, peak: Callable[[str], float | None],
             facts: Callable[[str], object]) -> list[CaseEstimate]:
    """Each case's lower bound in seconds (pure, given `peak` by dtype and `facts`)."""
    out = []
    for case in cases:
        flops, why = pass_flops(case, facts)
        top = peak(case.dtype) if flops is not None else None
        if flops is not None and not top:
            why = f"no {case.dtype} peak"
        seconds = flops * case_calls(case) / top if flops is not None and top else None
        out.append(CaseEstimate(case.case_id, seconds, None if seconds is not None else why))
    return out


def total(estimates: list[CaseEstimate]) -> float | None:
    """The sum of the cases that have an estimate (None: none has)."""
    known = [e.seconds for e in estimates if e.seconds is not None]
    return sum(known) if known else None


def duration(seconds: float | None) -> str:
    """`≥ H:MM:SS` (`< 0:00:01` under a second), `unknown` for None."""
    from .heartbeat import clock

    if seconds is None:
        return "unknown"
    return "≥ " + clock(seconds) if seconds >= 1 else "< 0:00:01"


def cell(e: CaseEstimate) -> str:
    """A case's estimate in a table: `≥ 0:03:20`, or `-` (not counted: why in the note)."""
    return duration(e.seconds) if e.seconds is not None else "-"


def summary(estimates: list[CaseEstimate], source: str) -> str:
    """One line: the total, how it is made and what it leaves out."""
    t = total(estimates)
    left = sorted({e.why for e in estimates if e.seconds is None and e.why})
    if t is None:
        return f"time here: unknown ({'; '.join(left) or source})"
    missing = sum(1 for e in estimates if e.seconds is None)
    out = f" ({missing} case(s) not estimated: {'; '.join(left)})" if missing else ""
    return f"time here: {duration(t)} in all{out} ({HOW}; peak: {source})"


def warning(config_name: str, where: str, estimates: list[CaseEstimate], target: str | None,
            here: dict | None) -> str | None:
    """The warning line for a config made for another machine, or None: its
    topology.target names a TPU this machine lacks, or its bound passes WARN_S."""
    t = total(estimates)
    lacks = target is not None and here is not None and not here.get("tpu")
    if not lacks and (t is None or t < WARN_S):
        return None
    why = [f"its topology.target is {target} and this machine has no TPU"] if lacks else []
    if t is not None:
        why.insert(0, f"would take {duration(t)} here")
    else:
        why.append("its time here is unknown")
    return (f"warning: {where} ({config_name}) is made for another machine: "
            f"{', '.join(why)}; for this one run configs/cpu.yaml, or shrink it with "
            "--case GLOB, --set runs.timed=1 or --set workload.num_items=N")


@dataclasses.dataclass
class Peaks:
    """This machine's peak FLOP/s by dtype, asked without measuring (the cache, else
    unknown), each dtype once; `source` says where the figures came from or why none."""

    here: dict | None = None  # accelerators by kind (engines.accelerators), None: unknown
    values: dict = dataclasses.field(default_factory=dict)
    sources: dict = dataclasses.field(default_factory=dict)

    def __call__(self, dtype: str) -> float | None:
        from ..host.peak import known_cpu_peak

        if dtype not in self.values:
            if self.here:  # a TPU or GPU: its kind (and peak) is JAX's to say
                kinds = " and ".join(sorted(self.here))
                self.values[dtype], self.sources[dtype] = None, (
                    f"this machine has a {kinds.upper()}, whose peak is known once a run "
                    "starts JAX")
            else:
                self.values[dtype], self.sources[dtype] = known_cpu_peak(dtype)
        return self.values[dtype]

    @property
    def source(self) -> str:
        parts = [f"{d} {fmt_flops(v)} FLOP/s, {self.sources[d]}" if v else self.sources[d]
                 for d, v in sorted(self.values.items())]
        return "; ".join(dict.fromkeys(parts)) or "no peak asked"


def fmt_flops(x: float) -> str:
    return f"{x:.3g}"


def of_config(config, cases: list, where: str) -> tuple[list[CaseEstimate], str, str | None]:
    """(each case's estimate, the summary line, the warning line or None) for `config`'s
    expanded `cases` on this machine; `where`: the config's file, as the user named it."""
    from mibench.engines import accelerators, model_facts

    peaks = Peaks(here=accelerators())
    found = estimate(cases, peaks, model_facts)
    target = config.topology.target if config.topology is not None else None
    return found, summary(found, peaks.source), warning(config.name, where, found, target,
                                                        peaks.here)

"""The report's "Compiles and memory" table: per case the XLA compilations of the first call,
the warmup and the timed runs, the case's own measured peak memory and its kind, and, given
compile artifacts (`mibench report RUN.json --compile COMPILE.json`), `mibench compile`'s
HBM estimate beside it.

A compile during the timed runs marks the case (`TIMED_MARK`, here and in the results
matrix) with a footnote; counts that were not taken say "not counted", never 0. An estimate
is matched to a case by case id, else by engine, mode, options and TP; the cell says when
its target is not the run's hardware or it compiled another workload or model.
"""

from __future__ import annotations

from ..judge.compile_counts import count
from ..records import CaseRecord, RunRecord
from ..records.compile import CompileCase, CompileRecord
from . import fmt
from .fmt import Table

TIMED_MARK = "†"
TIMED_NOTE = (f"{TIMED_MARK} XLA compiled during the case's timed runs: its times include "
              "compiling, not the steady state (prefill+extend pads batches to "
              "`precompile_bs` buckets to avoid this); `mibench compare` fails such a case.")
SOURCES = ("Peak memory: the case's own peak (harness/host/memory.py): device = the device's "
           "peak in use per chip, <= an upper bound (device-bound: an earlier case of the "
           "worker peaked higher), rss-rise = the resident set's rise during the case (CPU), "
           "rss = the process's resident set (older artifacts). Compiles: not counted = the "
           "artifact has no count.")
MASK_NOTE = (" Mask host->device/pass: the bytes of the mask a dense mode builds on the host "
             "and copies to the device every pass (modes/work.py; `mibench compile` counts "
             "the same at the program boundary), `-` where the mode copies none.")


def timed_marked(case: CaseRecord) -> bool:
    return bool(case.metrics.timed_compiles)


def match(case: CaseRecord, compiled: CompileRecord) -> CompileCase | None:
    """The compile artifact's case for a run case: the same id, else the same engine, mode,
    options and TP."""
    by_id = next((c for c in compiled.cases if c.case_id == case.case_id), None)
    if by_id is not None:
        return by_id
    return next((c for c in compiled.cases if (c.engine, c.mode, c.params) ==
                 (case.engine, case.mode, case.params)
                 and c.topology.tp == case.topology.tp), None)


def other_hardware(record: RunRecord, compiled: CompileRecord) -> str | None:
    """Why the compile target is not the run's hardware (None: it is)."""
    d, t = record.provenance.devices, compiled.target
    kinds = {t.device_kind, t.kind} - {None}
    if d.platform == "tpu" and d.kind in kinds and d.count == t.chips:
        return None
    return f"not this run's hardware ({fmt.hardware(record)})"


def estimate(case: CaseRecord, record: RunRecord, compiles: list[CompileRecord]) -> list[str]:
    """[estimate cell, measured / estimate, roofline bound, measured items/s / bound] of the
    first compile artifact with the case."""
    for compiled in compiles:
        found = match(case, compiled)
        if found is None:
            continue
        t = compiled.target
        c = found.compile
        if c is None or c.hbm_peak_bytes is None:
            return [f"{found.status} on {t.name}", "-", "-", "-"]
        same_workload = found.workload.as_dict() == case.workload.as_dict()
        notes = [n for n in (other_hardware(record, compiled),
                             "another workload" if not same_workload else None,
                             "another model" if found.model != case.model else None) if n]
        cell = f"{fmt.size(c.hbm_peak_bytes)} on {t.name}" + (
            f" ({'; '.join(notes)})" if notes else "")
        m = case.metrics
        mine = m.peak_memory_bytes if m.peak_memory_source in ("device", "device-bound") \
            else None
        ratio = f"{mine / c.hbm_peak_bytes:.2f}x" if mine and not notes else "-"
        return [cell, ratio] + _bound(case, c.roofline, notes)
    return ["no estimate", "-", "-", "-"]


def _bound(case: CaseRecord, roofline, notes: list[str]) -> list[str]:
    """[the roofline's items/s and resource, measured median items/s over it]."""
    if roofline is None:
        return ["-", "-"]
    thr = case.metrics.throughput_items_per_s
    share = f"{thr.median / roofline.items_per_s:.1%}" if thr and not notes else "-"
    return [f"{fmt.num(roofline.items_per_s)} ({roofline.bound})", share]


def mask_bytes(case: CaseRecord) -> float | None:
    """Host->device bytes per pass of the mask the case's mode builds on the host (a dense
    mask; modes/work.py, the same count as `mibench compile`'s), or None: no such mask, a
    requests file, or a model whose shape this machine cannot read."""
    from mibench.engines import MODES, MibenchError, Shape, model_facts

    w, mode = case.workload, MODES.get(case.engine, {}).get(case.mode)
    items = w.item_tokens
    if mode is None or w.requests or not w.query_tokens or not w.num_items or \
            not isinstance(items, int):
        return None
    try:
        semantics = mode.resolve_semantics(w.semantics, w.delimiter)
        shape = Shape(w.query_tokens + (semantics == "delimited"), w.num_items, items,
                      model=model_facts(case.model.path), dtype=case.model.dtype)
        work = mode.work_per_pass(shape, case.params)
    except MibenchError:
        return None
    return work.mask_bytes if work is not None and work.mask_bytes else None


def resources_table(rows, compiles: list[CompileRecord] | None = None) -> Table | None:
    """The table (see the module docstring), or None when no case counted compiles and no
    compile artifact was given (the results matrix shows the peaks then)."""
    compiles = compiles or []
    counted = any(getattr(r.case.metrics, k) is not None for r in rows for k in
                  ("first_call_compiles", "warmup_compiles", "timed_compiles"))
    if not rows or not (counted or compiles):
        return None
    many = len({r.run for r in rows}) > 1
    body = []
    for r in rows:
        m = r.case.metrics
        timed = count(m.timed_compiles)
        cells = ([r.run] if many else []) + [
            r.case.case_id, count(m.first_call_compiles), count(m.warmup_compiles),
            f"**{timed}** {TIMED_MARK}" if timed_marked(r.case) else timed,
            fmt.peak(m.peak_memory_bytes, m.peak_memory_source),
            m.peak_memory_source or "-", fmt.size(mask_bytes(r.case))]
        body.append(cells + (estimate(r.case, r.record, compiles) if compiles else []))
    header = (["Commit"] if many else []) + ["Case", "Compiles: first call", "warmup",
                                             "timed", "Peak memory", "Kind",
                                             "Mask host->device/pass"]
    header += ["HBM estimate (mibench compile)", "Measured / estimate", "Roofline items/s",
               "Measured / roofline"] if compiles else []
    align = (["l"] * (2 if many else 1) + ["r"] * 4 + ["l", "r"]
             + (["l", "r", "r", "r"] if compiles else []))
    note = SOURCES + MASK_NOTE
    if compiles:
        note += (" HBM estimate: the largest program's resident bytes per chip on the compile "
                 "target (XLA's memory analysis); measured / estimate only for a device peak "
                 "on the same hardware, workload and model. Roofline: the items/s the "
                 "target's peak FLOP/s and HBM bandwidth allow a pass (and which bounds it); "
                 "measured / roofline, the median run's share of it, on the same hardware, "
                 "workload and model only.")
    if any(timed_marked(r.case) for r in rows):
        note = f"{TIMED_NOTE} {note}"
    return Table(header, body, align, note=note)

"""The rows every exporter formats: one per case and timed run of each artifact (a case that
did not run ok: one row, its run fields empty), with the artifact's commit, config,
workload, hardware and the case's metrics. Plain dicts of plain values, in `COLUMNS`
order. `measurement_id` keys the measurement as `compare` and `history` do (case id,
workload, model, dtype, topology, hardware: harness.judge.comparable.measurement_id): rows
of one id are one series; `other_load` is the share of the CPU other processes held while
the case was measured."""

from __future__ import annotations

import json

from ...judge.comparable import measurement_id
from ...records import CaseRecord, RunRecord
from ...records.summaries import items_of, median, process_runs

WORKLOAD = ("query_tokens", "num_items", "item_tokens", "tokens", "semantics",
            "apply_softmax", "seed", "requests")
COLUMNS = (["run_id", "commit", "dirty", "branch", "started_at", "config", "config_sha256",
            "platform", "device_kind", "device_count", "cpu_model", "host", "case_id",
            "measurement_id", "engine", "mode", "options", "model", "dtype", "tp"]
           + [f"workload.{k}" for k in WORKLOAD]
           + ["status", "error", "process", "run", "time_s", "items", "items_per_s",
              "ms_per_item", "median_items_per_s", "compile_s", "mfu", "peak_flops",
              "peak_memory_bytes", "other_load"])


def _plain(value):
    """Lists and dicts as compact JSON text (a CSV cell); everything else as it is."""
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, separators=(",", ":"), sort_keys=True)
    return value


def _artifact(record: RunRecord) -> dict:
    p = record.provenance
    return {"run_id": record.run_id, "commit": p.git.commit, "dirty": p.git.dirty,
            "branch": p.git.branch, "started_at": record.started_at,
            "config": record.config.get("name"), "config_sha256": record.config_sha256,
            "platform": p.devices.platform, "device_kind": p.devices.kind,
            "device_count": p.devices.count,
            "cpu_model": p.host.get("cpu_model") or p.host.get("processor"),
            "host": p.host.get("hostname")}


def _case(case: CaseRecord) -> dict:
    m, w = case.metrics, case.workload.as_dict()
    return {"case_id": case.case_id, "engine": case.engine, "mode": case.mode,
            "options": _plain(case.params), "model": case.model.path,
            "dtype": case.model.dtype, "tp": case.topology.tp,
            **{f"workload.{k}": _plain(w.get(k)) for k in WORKLOAD},
            "status": case.status,
            "error": f"{case.error.type}: {case.error.message.splitlines()[0]}"
            if case.error and case.error.message else None,
            "median_items_per_s": median(m.throughput_items_per_s),
            "compile_s": case.compile_s, "mfu": m.mfu, "peak_flops": m.peak_flops,
            "peak_memory_bytes": m.peak_memory_bytes,
            "other_load": case.load.other_share if case.load else None}


def case_rows(records: list[RunRecord]) -> list[dict]:
    """Every case of every artifact, one row per timed run (`process` and `run` count
    from 1; `run` within its process)."""
    out = []
    for record in records:
        head = _artifact(record)
        for case in record.cases:
            base = {**head, **_case(case), "measurement_id": measurement_id(record, case)}
            n = items_of(case)
            runs = [(k + 1, j + 1, t) for k, proc in enumerate(process_runs(case))
                    for j, t in enumerate(proc)] if case.timed_s else []
            if not runs:
                out.append({c: base.get(c) for c in COLUMNS})
            for process, run, t in runs:
                row = {**base, "process": process, "run": run, "time_s": t, "items": n,
                       "items_per_s": n / t if n and t > 0 else None,
                       "ms_per_item": 1e3 * t / n if n else None}
                out.append({c: row.get(c) for c in COLUMNS})
    return out

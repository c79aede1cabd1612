"""The `speedup` parity check (docs/parity.md): each case of a gated mode must be at least
`parity.min_speedup` times as fast, in items/s, as its baseline mode's case of the same
engine, model, dtype, tp and workload (the packed mode over single: `Mode.speedup_gated`,
`Mode.speedup_baseline`). It reads the group's case records only: nothing is scored."""

from __future__ import annotations

import json

from mibench.engines import MODES

from ..records import CaseRecord, ParityCheck


def _throughput(rec: CaseRecord) -> float | None:
    t = rec.metrics.throughput_items_per_s
    return t.median if rec.status == "ok" and t is not None and t.median > 0 else None


def _same_measurement(rec: CaseRecord) -> tuple:
    return (rec.model.path, rec.model.dtype, rec.topology.tp,
            json.dumps(rec.workload.as_dict(), sort_keys=True))


def speedup_checks(records: list[CaseRecord], min_speedup: float,
                   items: list[int] | None = None) -> list[ParityCheck]:
    """Each case of a gated mode (`Mode.speedup_gated`: packed) over its baseline's items/s
    (`Mode.speedup_baseline`: single of the same engine) at the same model, dtype, tp and
    workload."""
    baselines: dict[tuple, CaseRecord] = {}
    for rec in sorted((r for r in records if _throughput(r)),
                      key=lambda r: len(r.params)):  # the default options first
        baselines.setdefault((rec.engine, rec.mode, *_same_measurement(rec)), rec)
    out = []
    for rec in records:
        mode = MODES.get(rec.engine, {}).get(rec.mode)
        if mode is None or not mode.speedup_gated:
            continue
        single = baselines.get((*mode.speedup_baseline, *_same_measurement(rec)))
        gated = items is None or rec.workload.num_items in items
        if single is None or not gated or not _throughput(rec):
            continue
        fast, slow = _throughput(rec), _throughput(single)
        out.append(ParityCheck(
            check="speedup", case_id=rec.case_id, against=single.case_id,
            tolerance=min_speedup, throughput_items_per_s=fast,
            against_throughput_items_per_s=slow, speedup=fast / slow,
            status="passed" if fast / slow >= min_speedup else "failed"))
    return out

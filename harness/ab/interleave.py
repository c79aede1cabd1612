"""One A/B round measured call by call: both revisions' workers are alive at once and take
turns, so the k-th timed call of one side runs right next to the k-th of the other.

Each side's worker runs the ordinary case (`run_case`, the one timing loop) paced: before
its first call and after each call it waits for the parent's go (the remote engine's paced
stepping: `start_case`, `next_event`, `go`; harness/run/worker.py).
The parent lets one side make one call, then the other, in the order A B, B A, A B, ...
(so neither side is always first). A load that comes and goes on a scale of seconds (a
neighbour's job, a frequency change) then falls on both calls of a pair, and the paired
log ratio of the k-th calls cancels it (judge/paired.py). Only one side runs at a time;
the other waits in a blocking read, using no CPU.

Interleaving needs both engines in memory at once and two processes on the device: it is
used where JAX runs on the CPU. On a GPU or TPU (one process owns the device) the sides of
a round run one after the other (`rounds._round`).
"""

from __future__ import annotations

import dataclasses

from ..config.cases import CaseSpec
from ..records import CaseRecord
from ..run.case import failed_record
from ..run.worker import RemoteEngine, WorkerPool


def lockstep(case: CaseSpec, pools: dict[str, WorkerPool], order: list[str]
             ) -> dict[str, CaseRecord]:
    """Measure `case` on every side of `pools` (name -> pool of that revision), their calls
    alternating; returns each side's record (a failed one where its worker failed)."""
    runs = case.runs
    if runs.timeout_s:  # a paced worker's clock also runs while the other side calls
        case = dataclasses.replace(case, runs=runs.model_copy(
            update=dict(timeout_s=runs.timeout_s * len(pools))))
    engines: dict[str, RemoteEngine] = {}
    records: dict[str, CaseRecord] = {}
    for name in order:  # both start side by side (untimed)
        pools[name].spawn(case.engine_key)
    for name in order:
        try:
            engines[name] = pools[name].get(case.engine_key)
            engines[name].start_case(case, None, paced=True)
        except Exception as e:
            records[name] = failed_record(case, e)
            engines.pop(name, None)
            pools[name].discard(case.engine_key)
    active = [name for name in order if name in engines]
    for name in list(active):  # each side builds its engine, then waits before its first call
        _await_side(name, engines, records, active, pools, case, first=True)
    turn = 0
    while active:
        for name in (active if turn % 2 == 0 else active[::-1]):
            if name in active:
                engines[name].go()
                _await_side(name, engines, records, active, pools, case)
        turn += 1
    return records


def _await_side(name: str, engines: dict[str, RemoteEngine], records: dict[str, CaseRecord],
                active: list[str], pools: dict[str, WorkerPool], case: CaseSpec,
                first: bool = False) -> None:
    """Wait for the side's next event: it is waiting again (a tick, or `measuring` before
    its first call), or it finished (its record) or failed."""
    try:
        kind, payload = engines[name].next_event()
        if kind == "done":
            records[name] = CaseRecord.model_validate(payload)
            active.remove(name)
        elif first and kind != "measuring":
            raise RuntimeError(f"paced worker: expected 'measuring', got {kind!r}")
    except Exception as e:
        records[name] = failed_record(case, e)
        active.remove(name)
        pools[name].discard(case.engine_key)  # dead, or out of step: the next case starts anew

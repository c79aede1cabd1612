"""How much the harness adds to a direct timed loop over the same engine call.

    mibench job overhead [CONFIG] [--rounds 3] [--set key=value] [--out FILE.json]

CONFIG (default `configs/overhead.yaml`) must expand to one case and have no parity checks.
Both sides use one preloaded engine and the same token ids, and both time their calls with
the one timing loop, `harness/run/measure.py`. The direct side is `measure()` on a bare
`engine.score` call with the case's `RunsRecord`: 1 + warmup + timed calls, each bracketed by
`perf_counter`. The harness side is `runner.run` on the config (the same calls through the
same loop, plus config expansion, workload, provenance, metrics and an artifact write after
the case). One direct pass compiles; then rounds alternate the two sides. Reported, as
medians over rounds:
- `harness_added_s`: `run()`'s wall time minus the time spent inside engine calls (the
  harness's own bookkeeping: config expansion, workload, provenance, metrics, artifact
  writes), and `overhead` = that / the direct side's wall time: the <= 2% budget;
- `per_call_min` / `per_call_median`: the harness's timed runs vs the direct side's, min
  against min and median against median (the same loop and bracket, so these differ only
  by noise: on a busy machine read the min).
- `worker_per_call_min` / `worker_per_call_median`: the same for a run the way `mibench
  run` does it, the case in an engine worker process (its own engine, loaded and compiled
  there), and `worker_start_s`: that run's wall time outside its engine calls (the device
  probe, the worker's start, imports and engine load), reported apart, not in the budget.
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from mibench.errors import MibenchError

from ..config import CaseSpec, Config, expand, load_config
from ..run.measure import Timings, measure
from ..run.pool import make_call

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "overhead.yaml"


class Lent:
    """The preloaded engine, lent to `runner.run`: its pool closes the engines it releases,
    and this one must outlive each round."""

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)

    def close(self) -> None:
        pass


def one_case(config: Config) -> CaseSpec:
    """The config's only case; more than one, or any parity check, is a MibenchError."""
    if config.parity is not None and config.parity.checks:
        raise MibenchError("the overhead job times the cases alone: leave parity checks out",
                           field="parity.checks")
    cases = expand(config)
    if len(cases) != 1:
        raise MibenchError(f"expands to {len(cases)} cases; the overhead job times exactly "
                           "one", field="cases")
    return cases[0]


def direct(engine, requests, case: CaseSpec) -> tuple[Timings, float]:
    """The direct side: the bare engine call through the timing loop, and its wall time."""
    call = make_call(engine, requests, case)  # the very call a case times
    t0 = time.perf_counter()
    timings = measure(call, case.runs, Timings())
    return timings, time.perf_counter() - t0


def main(config_path: Path = CONFIG, rounds: int = 3, sets: list[str] | tuple = (),
         out: Path | None = None) -> dict:
    """Run the job; print the result as JSON (and write it to `out`); return it."""
    if rounds < 1:
        raise MibenchError(f"must be at least 1, got {rounds}", field="--rounds")
    from mibench.engines import load_engine

    from ..host.peak import PeakTable
    from ..run.plan import plan_of
    from ..run.pool import EnginePool
    from ..run.runner import run

    config = load_config(config_path, list(sets))
    case = one_case(config)
    engine = load_engine(case.engine, model=case.model, dtype=case.dtype, tp=case.tp)
    factory = lambda *key: Lent(engine)  # noqa: E731 - the same engine on both sides
    peak = PeakTable("cpu", "cpu")  # calibrated here, outside the harness side's wall time
    peak(case.dtype)
    requests = EnginePool(factory).requests(case.engine_key, case.workload)
    direct(engine, requests, case)  # compiles for both sides
    rows = []
    with tempfile.TemporaryDirectory(prefix="mibench-overhead-") as tmp:
        for _ in range(rounds):
            d, d_wall = direct(engine, requests, case)
            t0 = time.perf_counter()
            record = run(plan_of(config, out=Path(tmp), progress=False, engine_factory=factory,
                                 peak=peak))
            h_wall = time.perf_counter() - t0
            (c,) = record.cases
            if c.status != "ok":
                raise RuntimeError(f"the harness side's case {c.status}: {c.error.message}")
            added = h_wall - (c.compile_s + sum(c.warmup_s) + sum(c.timed_s))
            t0 = time.perf_counter()
            # in a worker
            (w,) = run(plan_of(config, out=Path(tmp), progress=False, peak=peak)).cases
            w_wall = time.perf_counter() - t0
            if w.status != "ok":
                raise RuntimeError(f"the worker side's case {w.status}: {w.error.message}")
            rows.append({
                "worker_per_call_min": min(w.timed_s) / min(d.timed_s) - 1,
                "worker_per_call_median": statistics.median(w.timed_s)
                / statistics.median(d.timed_s) - 1,
                "worker_start_s": w_wall - (w.compile_s + sum(w.warmup_s) + sum(w.timed_s)),
                "worker_compile_s": w.compile_s,
                "direct_wall_s": d_wall, "harness_wall_s": h_wall, "harness_added_s": added,
                "overhead": added / d_wall,
                "per_call_min": min(c.timed_s) / min(d.timed_s) - 1,
                "per_call_median": statistics.median(c.timed_s)
                / statistics.median(d.timed_s) - 1})
    result = {"config": str(config_path), "case_id": case.case_id, "engine": case.engine,
              "mode": case.mode, "params": case.params,
              "calls_per_round": 1 + case.runs.warmup + case.runs.timed, "rounds": rounds,
              **{k: statistics.median(r[k] for r in rows) for k in rows[0]}, "by_round": rows}
    text = json.dumps(result, indent=1)
    print(text)
    if out is not None:
        from ..records.io import write_output

        write_output(out, text + "\n")
    return result

"""How much the harness adds to a direct timed loop over the same engine call.

    python -m mibench.harness.jobs.overhead [--mode packed --option mask=segment --timed 20 --rounds 3]

Both sides use one preloaded engine and the same token ids. The direct side is the loop
anyone would write: 1 + warmup + timed calls of `engine.score`, each bracketed by
`perf_counter`. The harness side is `runner.run` on a one-case config (the same calls,
plus provenance, metrics and an artifact write after the case). Rounds alternate the two
sides. Reported, as medians over rounds:
- `harness_added_s`: `run()`'s wall time minus the time spent inside engine calls (the
  harness's own bookkeeping: config expansion, workload, provenance, metrics, artifact
  writes), and `overhead` = that / the direct loop's wall time: the <= 2% budget;
- `per_call_min` / `per_call_median`: the harness's timed runs vs the direct loop's, min
  against min and median against median (the bracket is the same `perf_counter` pair, so
  these differ only by noise: on a busy machine read the min).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from mibench.harness.testing import write_config

CONFIG = """
name: overhead
model: {{path: "{model}", dtype: {dtype}}}
workload: {{query_tokens: {q}, num_items: {n}, item_tokens: {{dist: uniform, min: 4, max: 8}},
           label_token_ids: [198, 9834], delimiter: 151643}}
runs: {{warmup: {warmup}, timed: {timed}}}
cases:
  - {{engine: {engine}, mode: {mode}{options}}}
"""


def direct_loop(engine, q, items, labels, delim, kwargs, calls: int) -> tuple[list, float]:
    times = []
    t_start = time.perf_counter()
    for _ in range(calls):
        t0 = time.perf_counter()
        engine.score(q, items, labels, delimiter=delim, **kwargs)
        times.append(time.perf_counter() - t0)
    return times, time.perf_counter() - t_start


def parse(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", default="jax")
    ap.add_argument("--model", default="embedded:tiny")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--mode", default="packed")
    ap.add_argument("--option", action="append", default=["mask=segment"])
    ap.add_argument("--query", type=int, default=64)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timed", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    return ap.parse_args(argv)


def main(argv=None) -> dict:
    args = parse(argv)
    from mibench.engines import load_engine
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.run.peak import PeakTable
    from mibench.harness.run.runner import run

    engine = load_engine(args.engine, model=args.model, dtype=args.dtype)
    options = "".join(f", {o.replace('=', ': ', 1)}" for o in args.option)
    tmp = Path(tempfile.mkdtemp(prefix="mibench-overhead-"))
    config = load_config(write_config(tmp, CONFIG.format(
        model=args.model, dtype=args.dtype, q=args.query, n=args.items, warmup=args.warmup,
        timed=args.timed, engine=args.engine, mode=args.mode, options=options)))
    (case,) = expand(config)
    peak = PeakTable("cpu", "cpu")
    peak(args.dtype)
    factory = lambda *key: engine  # noqa: E731 - the same preloaded engine
    from mibench.harness.run.pool import EnginePool

    (req,) = EnginePool(factory).requests(case.engine_key, case.workload)
    q, items = list(req.query), [list(i) for i in req.items]
    kwargs = dict(mode=case.mode, apply_softmax=False, **case.params)
    calls = 1 + args.warmup + args.timed
    direct_loop(engine, q, items, [198, 9834], 151643, kwargs, calls)  # compile both sides
    rows = []
    for _ in range(args.rounds):
        times, d_wall = direct_loop(engine, q, items, [198, 9834], 151643, kwargs, calls)
        t0 = time.perf_counter()
        record = run(config, tmp / "out", progress=False, engine_factory=factory, peak=peak)
        h_wall = time.perf_counter() - t0
        c = record.cases[0]
        added = h_wall - (c.compile_s + sum(c.warmup_s) + sum(c.timed_s))
        timed = times[1 + args.warmup:]
        rows.append({"direct_wall_s": d_wall, "harness_wall_s": h_wall, "harness_added_s": added,
                     "overhead": added / d_wall,
                     "per_call_min": min(c.timed_s) / min(timed) - 1,
                     "per_call_median": statistics.median(c.timed_s) / statistics.median(timed)
                     - 1})
    result = {"engine": args.engine, "mode": args.mode, "params": case.params,
              "calls_per_round": calls, "rounds": args.rounds,
              **{k: statistics.median(r[k] for r in rows) for k in rows[0]}, "by_round": rows}
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()

"""Calibration of the A/B gate on this machine (not part of CI; `mibench job calibrate` or
`nox -s calibrate`): how often `mibench ab` cries wolf, and how often it catches a real
slowdown, under a background process that loads one core part of the time.

A scratch repository is built from this project's engines with four commits: `base`,
`aa` (no engine change), `slow20` and `slow50` (every `prefill_extend` call 1.2x and 1.5x
as long). The workload is small (`prefill_extend`, a 128-token query, 24 items of 20
tokens on `tiny`, 15 timed calls per side and round) and JAX's persistent compilation cache
is on, so a trial takes a minute or two (mostly worker start-up).
Reported: false regressions in `trials` A/A runs (base vs aa), detections in `trials`
runs against each slow commit, and every trial's change and interval; then `trials` + 1
separate `mibench run`s of the same config at the current code, each compared with the
one before by `compare` (its default noise floor): the false regressions of a plain
compare of separate runs.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import time
from pathlib import Path

from ..ab.scratch import append, commit, copy_project, slower
from ..judge.paired import timing_line

EXTEND = "engines/modes/extend.py"
SCENARIOS = ("aa", "slow20", "slow50")
CONFIG = """
name: calibrate
model: {path: "embedded:tiny"}
workload: {query_tokens: 128, num_items: 24, item_tokens: 20, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 2, timed: 15}
cases:
  - {engine: jax, mode: prefill_extend, extend_batch_size: 16}
"""
PROJECT = Path(__file__).resolve().parents[2]


def build(repo: Path) -> dict[str, str]:
    copy_project(PROJECT, repo)
    shas = {"base": commit(repo, "base")}
    (repo / "NOTES").write_text("no engine change\n")
    shas["aa"] = commit(repo, "A/A: no engine change")
    for name, factor in (("slow20", 1.2), ("slow50", 1.5)):
        original = (repo / EXTEND).read_text()
        append(repo, EXTEND, slower("score_prefill_extend", factor))
        shas[name] = commit(repo, f"prefill_extend {factor}x as long")
        (repo / EXTEND).write_text(original)
        commit(repo, "undo")
    return shas


def _burn(stop) -> None:
    """Load one core half of the time, in 2-second periods (busy 1 s, idle 1 s)."""
    while not stop.is_set():
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            pass
        stop.wait(1.0)


@contextlib.contextmanager
def background_load(on: bool):
    if not on:
        yield
        return
    stop = multiprocessing.Event()
    proc = multiprocessing.Process(target=_burn, args=(stop,), daemon=True)
    proc.start()
    try:
        yield
    finally:
        stop.set()
        proc.join(5)


def main(out: Path, trials: int = 20, rounds: int = 5, load: bool = True) -> dict:
    from ..ab.rounds import run_ab
    from ..config import load_config

    out = Path(out)
    repo, cache = out / "scratch", out / "cache"
    repo.mkdir(parents=True, exist_ok=True)
    (out / "calibrate.yaml").write_text(CONFIG)
    shas = build(repo)
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(cache / "jax"))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    config = load_config(out / "calibrate.yaml")
    result: dict = {"trials": trials, "rounds": rounds, "background_load": load,
                    "cpu": _cpu(), "by_kind": {}}
    t0 = time.perf_counter()
    with background_load(load):
        rows: dict[str, list] = {scenario: [] for scenario in SCENARIOS}
        for k in range(trials):  # interleaved: a stopped calibration has each scenario
            for scenario in SCENARIOS:
                record, _ = run_ab(config, repo, shas["base"], shas[scenario], cache,
                                   rounds=rounds, out=out / "ab", note=lambda line: None)
                (case,) = record.cases
                t = case.timing
                errors = [s.error for s in case.base + case.new if s.error]
                rows[scenario].append({"verdict": case.verdict, "change": t.change,
                                       "low": t.low, "high": t.high, "p": t.p_value,
                                       "errors": errors, "pacing": record.pacing,
                                       "d": t.round_log_ratios})
                print(f"{scenario} {k + 1}/{trials}: {case.verdict} {timing_line(t)}"
                      + (f"; {len(errors)} failed sides, first: {errors[0]}" if errors else ""),
                      flush=True)
                flagged = sum(r["verdict"] == "regression" for r in rows[scenario])
                result["by_kind"][scenario] = {"regressions": flagged,
                                               "of": len(rows[scenario]),
                                               "trials": rows[scenario]}
                (out / "calibrate.json").write_text(json.dumps(result, indent=1))
        result["compare"] = separate_runs(config, out / "runs", trials)
    result["seconds"] = time.perf_counter() - t0
    (out / "calibrate.json").write_text(json.dumps(result, indent=1))
    summary = {k: f"{v['regressions']}/{v['of']}" for k, v in result["by_kind"].items()}
    summary["compare"] = f"{result['compare']['regressions']}/{result['compare']['of']}"
    print(f"regressions flagged (aa = false alarms): {summary}; {result['seconds']:.0f} s")
    return result


def separate_runs(config, folder: Path, trials: int) -> dict:
    """`trials` + 1 runs, each compared with the previous one: regressions flagged."""
    from ..judge.compare import compare
    from ..run.plan import plan_of
    from ..run.runner import run

    records = []
    for k in range(trials + 1):
        records.append(run(plan_of(config, out=folder, progress=False)))
        print(f"run {k + 1}/{trials + 1}", flush=True)
    rows = []
    for base, new in zip(records, records[1:], strict=False):
        verdict = compare(base, new)
        (case,) = verdict.cases
        rows.append({"regression": verdict.regression, "verdict": case.verdict,
                     "latency_change": case.latency_change})
        print(f"compare: {case.verdict} {case.latency_change}", flush=True)
    return {"regressions": sum(r["regression"] for r in rows), "of": len(rows), "pairs": rows}


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"

"""One timing loop, no argparse: `mibench job overhead` writes its result with both sides
timed by `harness/run/measure.py`, the modes benchmark is a config run through the same
loop, `python -m mibench.engines.bench` is gone, no other module keeps a timing loop of its
own, and the resident-set peak sees a known allocation."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mibench.harness.config import expand, load_config
from mibench.harness.host import memory
from mibench.harness.records import RunsRecord
from mibench.harness.testing import fake_factory, fixed_peak, write_config

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engines", "harness", "workloads", "mibench")
MiB = 2**20


def sources(folders=PACKAGES) -> dict[str, str]:
    """Repository-relative path -> source of every module of the packages."""
    return {str(p.relative_to(ROOT)): p.read_text()
            for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))}


def counting_loop(monkeypatch) -> dict[str, int]:
    """Wrap the one `measure` under every name it is bound to in mibench's loaded modules;
    count the calls per binding (module name)."""
    import mibench.harness.jobs.overhead  # noqa: F401 - loaded, so its binding is wrapped
    import mibench.harness.run.measure as loop
    import mibench.harness.run.runner  # noqa: F401

    real, calls = loop.measure, {}

    def bind(name, module):
        def counted(*args, **kwargs):
            calls[name] = calls.get(name, 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(module, "measure", counted)

    for name, module in list(sys.modules.items()):
        if name.startswith("mibench.") and getattr(module, "measure", None) is real:
            bind(name, module)
    return calls


TINY = """
    name: overhead-tiny
    model: {path: "embedded:tiny", dtype: float32}
    workload: {query_tokens: 16, num_items: 4, item_tokens: 4, label_token_ids: [198, 9834],
               delimiter: 151643}
    runs: {warmup: 1, timed: 2}
    cases:
      - {engine: jax, mode: packed, mask: segment}
"""


@pytest.mark.slow
def test_overhead_job_times_both_sides_with_the_one_loop(tmp_path, monkeypatch):
    from mibench.harness.cli import app

    calls = counting_loop(monkeypatch)
    out = tmp_path / "overhead.json"
    result = CliRunner().invoke(app, ["job", "overhead", str(write_config(tmp_path, TINY)),
                                      "--rounds", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert json.loads(result.stdout) == data  # the same JSON on stdout
    assert data["case_id"] == "jax/packed/mask=segment/tp=1" and data["rounds"] == 2
    assert data["calls_per_round"] == 1 + 1 + 2 and len(data["by_round"]) == 2
    for row in data["by_round"]:
        assert row["direct_wall_s"] > 0 and row["harness_wall_s"] > 0
        assert row["overhead"] == pytest.approx(row["harness_added_s"] / row["direct_wall_s"])
    assert data["overhead"] == pytest.approx(sum(r["overhead"] for r in data["by_round"]) / 2)
    # direct side: one compiling pass and one per round; harness side: one case per round
    direct = calls.pop("mibench.harness.jobs.overhead", 0)
    assert direct == 3 and sum(calls.values()) == 2, calls


def test_overhead_job_bad_input_is_one_line_exit_2(tmp_path):
    two = write_config(tmp_path, TINY.replace("mask: segment", "mask: [dense, segment]"))
    for args, message in (([str(tmp_path / "missing.yaml")], "no such config file"),
                          ([str(two)], "cases: expands to 2 cases"),
                          (["--rounds", "0"], "--rounds: must be at least 1")):
        proc = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "job", "overhead",
                               *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and proc.stdout == "" and len(lines) == 1, proc.stderr
        assert lines[0].startswith("error: ") and message in lines[0], lines[0]


# what the old engines/bench.py (gone) measured: (mode, options), labels [198], query 2000, 500 x 20
BENCH_CASES = [("single", {}), ("packed", {"mask": "dense"}), ("packed", {"mask": "segment"}),
               ("packed", {"mask": "segment"}), ("chunked", {"chunk_size": 32}),
               ("chunked", {"chunk_size": 64}), ("chunked", {"chunk_size": 128}),
               ("prefill_extend", {"extend_batch_size": 12}),
               ("prefill_extend", {"extend_batch_size": 64}),
               ("prefill_extend", {"extend_batch_size": 500})]


def test_bench_modes_config_runs_every_case_through_the_one_loop(tmp_path, monkeypatch):
    from mibench.harness.run.plan import plan_of
    from mibench.harness.run.runner import run

    path = ROOT / "configs" / "bench-modes.yaml"
    cases = expand(load_config(path))
    assert [(c.engine, c.mode, c.params) for c in cases] == [("jax", m, p)
                                                             for m, p in BENCH_CASES]
    items = [c.workload.num_items for c in cases]
    assert items == [16, 500, 500, 250, 500, 500, 500, 500, 500, 500]
    for c in cases:
        w = c.workload
        assert (c.model, c.dtype, w.query_tokens, w.item_tokens, w.tokens) == (
            "embedded:tiny", "float32", 2000, 20, "random")
        assert (w.label_token_ids, w.delimiter, w.apply_softmax) == ((198,), 151643, False)
        assert c.runs == (RunsRecord(warmup=0, timed=1) if c.mode == "single"
                          else RunsRecord(warmup=1, timed=3))
    calls = counting_loop(monkeypatch)
    small = load_config(path, ["workload.query_tokens=8", "cases.2.workload.num_items=3",
                               "workload.num_items=6", "cases.0.workload.num_items=2"])
    record = run(plan_of(small, out=tmp_path / "out", progress=False,
                         engine_factory=fake_factory(), peak=fixed_peak()))
    assert [c.status for c in record.cases] == ["ok"] * 10
    assert sum(calls.values()) == 10 and "mibench.harness.jobs.overhead" not in calls
    for c in record.cases:
        assert len(c.timed_s) == c.runs.timed and c.metrics.throughput_items_per_s
        assert c.compile_s > 0 and c.metrics.peak_memory_bytes is not None


# clocks a benchmark reads (`monotonic` is left out: the workers' deadlines, not timings)
CLOCKS = {"perf_counter", "perf_counter_ns", "process_time", "thread_time", "time", "time_ns"}
THE_LOOP = ("harness/run/measure.py", "measure")
# loops that time something other than one benchmark call, each for its own reason
OTHER_LOOPS = {
    ("harness/host/peak.py", "calibrate_cpu"): "the CPU's matmul FLOP/s (best of a few)",
    ("engines/profile.py", "_ms"): "the stage profile: sub-programs synced one by one",
    ("harness/jobs/overhead.py", "main"): "rounds: the wall time of `measure()` and of "
                                          "`runner.run` as wholes, around the one loop",
    ("harness/under_test/send.py", "open_loop"): "a server's requests sent on a Poisson "
                                                 "schedule, each one's latency (no engine call)",
    ("harness/under_test/cold_start.py", "one_launch"): "a fresh server's first and warm "
                                                        "requests, one at a time (no engine "
                                                        "call)",
    ("engines/modes/extend.py", "extend_batch_times"): "the per-batch synced pass, outside "
                                                       "the timed runs (batch_s)",
    ("engines/compile.py", "compile_case"): "compile time of each TPU program (nothing runs)",
    ("harness/compile/worker.py", "serve"): "a compile worker's case wall time",
    ("harness/jobs/calibrate.py", "_burn"): "a busy loop: the calibration's background load",
    ("harness/jobs/verdicts.py", "main"): "the wall time of each part of the verdicts job, "
                                          "around whole runs",
    ("harness/under_test/jobs/http_overhead.py", "main"): "two kinds of call alternating "
                                                          "pairwise (in process, over http): "
                                                          "the one loop repeats one",
    ("harness/jobs/site_scale.py", "main"): "the wall time of writing a history and "
                                               "building its site, around whole builds",
    ("harness/jobs/nightly_scenario.py", "main"): "the wall time of each night of the "
                                                  "scenario, around whole `mibench nightly`s",
}


def _calls_clock(node: ast.AST, timers: set[str]) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            if isinstance(f, ast.Name) and (f.id in timers or f.id in CLOCKS - {"time"}):
                return True
            if isinstance(f, ast.Attribute) and f.attr in CLOCKS and (
                    f.attr != "time" or getattr(f.value, "id", None) == "time"):
                return True
    return False


def timing_loops(source: str) -> set[str]:
    """The functions (or `<module>`) holding a loop that reads a clock in its body, directly
    or through a function of the same module that reads one (`measure`'s `_timed`)."""
    tree = ast.parse(source)
    timers = {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
              and _calls_clock(f, set())}
    loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.GeneratorExp, ast.SetComp,
             ast.DictComp)
    found = set()

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, child.name)
            elif isinstance(child, loops) and _calls_clock(child, timers):
                found.add(where)
            else:
                visit(child, where)

    visit(tree, "<module>")
    return found


def test_one_timing_loop():
    found = {(path, where) for path, text in sources().items() for where in timing_loops(text)}
    assert THE_LOOP in found  # the detector sees the one loop
    assert found - {THE_LOOP} <= OTHER_LOOPS.keys(), found - {THE_LOOP} - OTHER_LOOPS.keys()
    # controls: the loops that were removed are found
    old_direct = ("import time\ndef direct_loop(engine, calls):\n    times = []\n"
                  "    for _ in range(calls):\n        t0 = time.perf_counter()\n"
                  "        engine.score()\n        times.append(time.perf_counter() - t0)\n")
    old_bench = ("from time import perf_counter\ndef measure(call, runs):\n"
                 "    return [timed(call) for _ in range(runs)]\n"
                 "def timed(call):\n    t0 = perf_counter()\n    call()\n"
                 "    return perf_counter() - t0\n")
    assert timing_loops(old_direct) == {"direct_loop"} and timing_loops(old_bench) == {"measure"}
    assert not timing_loops("import time\nt0 = time.perf_counter()\nfor x in y:\n    f(x)\n")
    assert not timing_loops("import time\nwhile time.monotonic() < end:\n    poll()\n")


def test_engines_bench_is_gone():
    assert importlib.util.find_spec("mibench.engines.bench") is None
    assert not (ROOT / "engines" / "bench.py").exists()
    proc = subprocess.run([sys.executable, "-m", "mibench.engines.bench"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "No module named mibench.engines.bench" in proc.stderr


def imports_argparse(source: str) -> bool:
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(n.split(".")[0] == "argparse" for n in names):
            return True
    return False


def test_no_argparse_command_lines():
    """The Typer CLI (`mibench`, `python -m mibench.harness.cli`) is the only command line."""
    found = [path for path, text in sources(("engines", "harness")).items()
             if imports_argparse(text)]
    assert found == []
    for control in ("import argparse", "def main():\n    from argparse import ArgumentParser",
                    "import os, argparse as ap"):
        assert imports_argparse(control), control
    assert not imports_argparse("import typer\nfrom mibench import errors")


def touch_200mb():
    a = np.ones(200 * MiB // 8)  # every page written: resident
    time.sleep(0.05)  # long enough for a sampling thread to see it
    del a


def test_peak_rss_sees_a_known_allocation():
    with memory.PeakRss() as rss:
        touch_200mb()
    assert rss.extra >= 150 * MiB and rss.peak >= rss.base + rss.extra
    with memory.PeakRss() as quiet:
        pass
    assert quiet.extra < 50 * MiB  # the earlier peak is not carried into a later block


def test_peak_rss_nested_blocks_keep_the_outer_peak():
    with memory.PeakRss() as outer:
        with memory.PeakRss() as inner:
            touch_200mb()
        with memory.PeakRss():  # resets the kernel's high-water mark again
            pass
    assert inner.extra >= 150 * MiB and outer.extra >= 150 * MiB


def test_peak_rss_sampled_where_the_kernel_cannot_say(monkeypatch):
    monkeypatch.setattr(memory, "_reset_high_water", lambda: False)
    with memory.PeakRss() as rss:
        touch_200mb()
    assert not rss.exact and rss.extra >= 150 * MiB


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux's")
def test_peak_rss_is_exact_on_linux():
    with memory.PeakRss() as rss:
        a = np.ones(200 * MiB // 8)
        del a  # freed at once: no sampler could be sure to see it, the kernel does
    assert rss.exact and rss.extra >= 150 * MiB


def test_the_timing_loop_records_the_timed_calls_peak_rise():
    from mibench.harness.run.measure import Timings, measure

    timings = measure(touch_200mb, RunsRecord(warmup=0, timed=2), Timings())
    assert len(timings.timed_s) == 2 and timings.peak_rise_bytes >= 150 * MiB


@pytest.mark.slow
def test_http_overhead_job_times_both_paths_on_the_same_scores():
    """`mibench job http-overhead`: the launched server and the in-process engine answer the
    same request with the same scores; both paths are timed."""
    from mibench.harness.under_test.jobs import http_overhead

    out = http_overhead.main(calls=3)
    assert out["max_abs_diff"] == 0.0
    assert out["in_process_ms"] > 0 and out["http_ms"] > 0 and out["client_cpu_ms"] > 0
    assert out["ratio"] == pytest.approx(out["http_ms"] / out["in_process_ms"])


def test_the_nightly_suites_checks_leave_out_the_kinds_that_did_not_run():
    """A check about a kind of scenario that did not run is not ticked; one that ran is
    judged (a regression run that named nobody fails it)."""
    from mibench.harness.jobs.nightly_suite import checks

    def run(expected, named, exit_code, degenerate=False):
        return {"expected": expected, "named": named, "wrong": [], "false": [],
                "exit": exit_code, "degenerate": degenerate, "names_degenerate": degenerate,
                "baseline_kept": True}

    only_first = {"seed": {"exit": 0}, "scenarios": {"first": run(["a"], ["a"], 1)}}
    lines = dict(checks(only_first))
    assert lines["every regression run named its culprit(s) (exit 1)"]
    assert not any("no-regression" in k or "degenerate" in k for k in lines)
    missed = {"seed": {"exit": 0}, "scenarios": {"first": run(["a"], [], 1),
                                                 "none": run([], [], 1),
                                                 "degenerate": run([], [], 1, True)}}
    lines = dict(checks(missed))
    assert not lines["every regression run named its culprit(s) (exit 1)"]
    assert not lines["0 failed jobs in the no-regression runs"]
    assert lines["a mode that scores nothing fails the night with `degenerate` and keeps the "
                 "baseline (exit 1)"]


def test_a_jobs_rows_are_saved_as_json_and_markdown_each_ending_in_a_newline(tmp_path):
    from mibench.harness.jobs.outputs import save

    save(None, "x", {"a": 1}, "| a |")  # no folder: nothing written, nothing raised
    save(tmp_path / "new", "score-checks", {"rows": [1], "all_hold": True}, "| a |\n|---|")
    assert (tmp_path / "new" / "score-checks.json").read_text() == (
        '{\n "rows": [\n  1\n ],\n "all_hold": true\n}\n')
    assert (tmp_path / "new" / "score-checks.md").read_text() == "| a |\n|---|\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new"]

"""A case's own peak memory on a CPU does not depend on the cases run before it.

On a CPU a case's own peak is how far the resident set rose while it ran (`rss-rise`). A
process's first engine call pays one-time costs (JAX's runtime, compiler and code pages:
about 100 MiB), which used to land in the first case's rise, so `--case X` against the
full run was a "memory regression" of several hundred percent. The runner now warms the
runtime with one tiny untimed call before the first rise it measures
(harness/run/pool.py `warm_runtime`), and gives the C heap's free pages back to the system
before each case (harness/host/memory.py `release_free_memory`), so a case that runs after
others does not rise by less for reusing the pages they freed.

Here the engine is the test fake with a runtime that allocates `RUNTIME` bytes on its
first call in a process and keeps them, and cases that allocate (and free) their own
bytes in every call: real resident memory of this process, measured by the kernel's
high-water mark. A small config of three cases: each case alone against the full run
gives no memory verdict; a case that allocates 2x more is still caught; the control (no
warm-up) shows the test can fail; and the heap's freed pages are given back.
"""

from __future__ import annotations

import functools
import os

import pytest

from mibench.harness.config import load_config
from mibench.harness.judge.compare import compare
from mibench.harness.run import case as case_module
from mibench.harness.run import pool as pool_module
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import FakeEngine, fixed_peak, write_config

MIB = 2**20
RUNTIME = 100 * MIB  # a process's one-time cost, kept
OWN = {"single": 40 * MIB, "packed": 48 * MIB, "chunked": 56 * MIB}  # per call, freed
CONFIG = """
name: memory-order
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [5],
           delimiter: 151643}
runs: {warmup: 1, timed: 3, timeout_s: 600}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed}
  - {engine: jax, mode: chunked, chunk_size: 2}
"""
IDS = ["jax/single*", "jax/packed*", "jax/chunked*"]


class Process:
    """The state a fresh `mibench run` process starts without: the fake runtime's kept
    bytes and the runner's per-process memory bookkeeping (each run's pool is new, so its
    engine is warmed again)."""

    def __init__(self, monkeypatch):
        self.monkeypatch, self.kept = monkeypatch, []

    def fresh(self) -> None:
        self.kept.clear()
        self.monkeypatch.setattr(case_module, "_measured_here", [0])

    def factory(self, own: dict[str, int]):
        def runtime(engine, n):
            if not self.kept:
                self.kept.append(b"\x01" * RUNTIME)  # touched: resident

        def allocate(nbytes):
            def call(engine):
                block = b"\x02" * nbytes
                assert block[-1] == 2  # touched, then freed when the call returns
            return call

        return functools.partial(FakeEngine, on_call=runtime,
                                 on_mode={m: allocate(b) for m, b in own.items()})


@pytest.fixture
def process(monkeypatch):
    return Process(monkeypatch)


def run_config(tmp_path, process: Process, own=None, cases=()):
    """One `mibench run` in a fresh process (in-process here, the fake engine)."""
    process.fresh()
    config = load_config(write_config(tmp_path, CONFIG))
    return run(plan_of(config, out=tmp_path / "out", progress=False, cases=list(cases),
                       engine_factory=process.factory(own or OWN), peak=fixed_peak(),
                       workers=False))


def test_each_case_alone_against_the_full_run_gives_no_memory_verdict(tmp_path, process):
    full = run_config(tmp_path, process)
    for glob in IDS:
        alone = run_config(tmp_path, process, cases=[glob])
        (case,) = alone.cases
        assert case.metrics.peak_memory_source == "rss-rise"
        for base, new in ((full, alone), (alone, full)):
            check = next(c for c in compare(base, new).cases if c.case_id == case.case_id)
            assert check.memory.ratio is not None, check.memory.note  # compared ...
            assert not check.memory.regression, check.memory.note  # ... and no verdict
            assert check.verdict != "memory regression"


def test_a_case_that_allocates_twice_as_much_is_still_caught(tmp_path, process):
    full = run_config(tmp_path, process)
    doubled = run_config(tmp_path, process, own={**OWN, "packed": 2 * OWN["packed"]})
    result = compare(full, doubled)
    packed = next(c for c in result.cases if c.case_id.startswith("jax/packed"))
    # memory regression, or regression (touching twice the pages also takes longer): the
    # case fails the gate, its reason naming the memory
    assert packed.memory.regression and packed.regression, packed.reason
    assert "peak memory (rss-rise)" in packed.reason and packed.memory.ratio > 1.5
    others = [c for c in result.cases if not c.case_id.startswith("jax/packed")]
    assert not any(c.memory.regression for c in others), [c.memory.note for c in others]


def test_control_without_the_warm_up_the_first_case_absorbs_the_runtime(tmp_path, process,
                                                                        monkeypatch):
    """Without `warm_runtime` the full run's first case carries the runtime's 100 MiB and
    the same case alone does not (packed alone is first too, so compare the second case
    of the full run with it alone): a memory verdict caused by case order alone."""
    monkeypatch.setattr(case_module, "warm_runtime", lambda *args: None)
    full = run_config(tmp_path, process)
    first, second = full.cases[0].metrics, full.cases[1].metrics
    assert first.peak_memory_bytes > second.peak_memory_bytes + RUNTIME // 2
    alone = run_config(tmp_path, process, cases=[IDS[1]])
    packed = next(c for c in compare(full, alone).cases if c.case_id.startswith("jax/packed"))
    # the memory verdict (timing may move too on a busy machine: then the word is
    # `regression`, the memory part the same)
    assert packed.memory.regression and packed.verdict in ("memory regression", "regression")


FREED = """
import ctypes, numpy as np
from mibench.harness.host import memory
libc = ctypes.CDLL(None)
libc.mallopt(-3, 4 << 20)  # M_MMAP_THRESHOLD: 1 MiB blocks come from the heap
libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: a free never gives the heap's top back
blocks = [np.ones(1 << 20, np.uint8) for _ in range(64)]
before = memory.rss_bytes()
del blocks
kept = memory.rss_bytes()
print(before, kept, memory.release_free_memory(), memory.rss_bytes())
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux /proc")
def test_freed_heap_pages_go_back_before_a_case():
    """`release_free_memory` gives back what the C heap keeps after a free (here made
    certain in a fresh interpreter: blocks from the heap, no trimming on free), which a
    case measured next would reuse, and so rise by less than it uses."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", FREED], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    before, kept, released, given = int(out[0]), int(out[1]), out[2], int(out[3])
    assert released == "True"
    assert before - kept < 8 * MIB  # kept by the heap ...
    assert kept - given > 56 * MIB  # ... and given back


def test_warm_runtime_is_one_tiny_single_call_and_never_raises(tmp_path):
    from mibench.harness.config import expand

    calls = []

    class Engine:
        def score(self, query, items, labels, mode, **kw):
            calls.append((len(query), [len(i) for i in items], labels, mode))
            raise RuntimeError("the case itself will say")

    case = expand(load_config(write_config(tmp_path, CONFIG)))[1]  # packed: warmed by single
    request = type("Request", (), {"query": list(range(30)), "items": [[1, 2, 3], [4]]})
    pool_module.warm_runtime(Engine(), [request], case)
    assert calls == [(8, [2], [5], "single")]

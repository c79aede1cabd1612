"""Engine worker processes: a case that crashes, blows up memory or hangs in native code
is a `failed` row with its cause, and the later cases still run (in a fresh worker)."""

from __future__ import annotations

import functools

import pytest

from mibench.harness import testing
from mibench.harness.config import load_config
from mibench.harness.config.keys import EngineKey
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import FakeEngine, fixed_peak, write_config

pytestmark = pytest.mark.slow  # engine worker processes

CONFIG = """
name: workers
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [5],
           delimiter: 151643}
runs: {warmup: 0, timed: 2, timeout_s: 60, max_rss: 400MiB}
cases:
  - {engine: jax, mode: packed}
  - {engine: jax, mode: single}
  - {engine: jax, mode: prefill_extend}
"""


def run_with(tmp_path, trouble, timeout_s: float = 60):
    """CONFIG with `trouble` in the packed case's calls; a generous timeout for every other
    case (a starved machine must not time out a trivial case), `timeout_s` for the packed
    one (3 s for a hang)."""
    factory = functools.partial(FakeEngine, on_mode={"packed": trouble})
    text = CONFIG.replace("{engine: jax, mode: packed}",
                          f"{{engine: jax, mode: packed, runs: {{timeout_s: {timeout_s}}}}}")
    config = load_config(write_config(tmp_path, text), ["runs.timeout_s=60"])
    record = run(plan_of(config, out=tmp_path / "out", progress=False, engine_factory=factory,
                         peak=fixed_peak(), workers=True))
    return {c.mode: c for c in record.cases}


@pytest.mark.parametrize("trouble, cause", [
    (testing.segfault, "killed by SIGSEGV"),
    (functools.partial(testing.allocate, mib=1024), "past runs.max_rss = 400 MiB"),
    (testing.hang_in_native_code, "exceeded runs.timeout_s=3"),
])
def test_a_dying_worker_fails_its_case_and_the_run_goes_on(tmp_path, trouble, cause):
    hangs = trouble is testing.hang_in_native_code
    # 3 s: the hang must block the worker's own alarm before it fires, even on a starved
    # machine (else the case fails as a CaseTimeout, and the parent's deadline is untested)
    cases = run_with(tmp_path, trouble, 3 if hangs else 60)
    assert cases["packed"].status == "failed"
    assert cause in cases["packed"].error.message, cases["packed"].error.message
    assert cases["packed"].error.type == "WorkerDied"
    for mode in ("single", "prefill_extend"):  # a fresh worker measures the rest
        assert cases[mode].status == "ok", cases[mode].error
        assert len(cases[mode].timed_s) == 2


def test_cases_measured_in_a_worker_match_in_process(tmp_path):
    """The worker runs the same measurement: same scores digest, same record shape."""
    # a generous timeout (CONFIG's 60 s): a starved machine must not fail a trivial case
    config = load_config(write_config(tmp_path, CONFIG))
    both = [run(plan_of(config, out=tmp_path / name, progress=False, engine_factory=FakeEngine,
                        peak=fixed_peak(), workers=workers)) for name, workers in (("a", True),
                                                                         ("b", False))]
    for a, b in zip(*(r.cases for r in both), strict=True):
        assert a.status == b.status == "ok"
        assert a.metrics.score_digest == b.metrics.score_digest
        assert a.runs.max_rss == 400 * 2**20


def test_runs_processes_measures_each_case_in_fresh_workers(tmp_path, monkeypatch):
    pids = tmp_path / "pids"
    monkeypatch.setenv("MIBENCH_TEST_PIDS", str(pids))
    # the packed case's calls (each worker's one warm-up call is a `single` one: run/pool.py)
    factory = functools.partial(FakeEngine, on_mode={"packed": testing.record_pid})
    config = load_config(write_config(tmp_path, CONFIG), ["runs.processes=3",
                                                          "runs.timeout_s=60"])
    record = run(plan_of(config, out=tmp_path / "out", progress=False, engine_factory=factory,
                         peak=fixed_peak(), workers=True))
    packed = next(c for c in record.cases if c.mode == "packed")
    assert packed.status == "ok" and packed.runs.processes == 3
    assert [len(t) for t in packed.process_timed_s] == [2, 2, 2]
    assert packed.timed_s == [t for ts in packed.process_timed_s for t in ts]
    assert packed.metrics.throughput_items_per_s.n == 6
    seen = pids.read_text().split()
    assert len(seen) == 3 * (1 + 2) and len(set(seen)) == 3  # three workers, one each


def test_runs_processes_needs_workers(tmp_path):
    from mibench.engines import MibenchError

    config = load_config(write_config(tmp_path, CONFIG), ["runs.processes=2"])
    with pytest.raises(MibenchError, match="runs.processes"):
        run(plan_of(config, out=tmp_path / "out", progress=False, engine_factory=FakeEngine,
                    peak=fixed_peak(), workers=False))


def test_on_an_accelerator_one_jax_worker_at_a_time(tmp_path):
    """An exclusive pool (GPU/TPU) closes the other JAX worker before it starts one."""
    from mibench.harness.run.worker import WorkerPool

    pool = WorkerPool(FakeEngine, exclusive=True)
    try:
        first = pool.get(EngineKey("jax", "embedded:tiny", "float32", 1))
        torch = pool.get(EngineKey("torch", "embedded:tiny", "float32", 1))  # not a JAX worker
        second = pool.get(EngineKey("jax", "embedded:tiny", "bfloat16", 1))
        assert first.worker.proc.poll() is not None  # closed before the second started
        assert torch.worker.proc.poll() is None and second.worker.proc.poll() is None
    finally:
        pool.close()


def _lockstep(tmp_path, base_trouble=None):
    """Both sides of an A/B round on fake engines, their calls paced (ab/interleave.py)."""
    from mibench.harness.ab.interleave import lockstep
    from mibench.harness.config import expand
    from mibench.harness.run.worker import WorkerPool

    config = load_config(write_config(tmp_path, CONFIG), ["runs.warmup=1", "runs.timed=3"])
    # the packed case (each worker's one warm-up call before it is a `single` one)
    case = next(c for c in expand(config) if c.mode == "packed")
    new = functools.partial(FakeEngine, on_mode={"packed": testing.record_pid})
    base = functools.partial(FakeEngine, on_mode={"packed": base_trouble or
                                                  testing.record_pid})
    pools = {"base": WorkerPool(base), "new": WorkerPool(new)}
    try:
        records = lockstep(case, pools, ["base", "new"])
        pids = {name: pool.get(case.engine_key).worker.proc.pid
                for name, pool in pools.items()}
        return records, pids
    finally:
        for pool in pools.values():
            pool.close()


def test_ab_sides_take_turns_call_by_call(tmp_path, monkeypatch):
    """Each side makes one call, then the other: A B, B A, A B, ... (compile, warmup and
    timed calls), and both records are whole."""
    calls = tmp_path / "pids"
    monkeypatch.setenv("MIBENCH_TEST_PIDS", str(calls))
    records, pids = _lockstep(tmp_path)
    for rec in records.values():
        assert rec.status == "ok" and len(rec.timed_s) == 3 and len(rec.warmup_s) == 1
    assert records["base"].metrics.score_digest == records["new"].metrics.score_digest
    side = {str(pid): name for name, pid in pids.items()}
    seen = [side[p] for p in calls.read_text().split()]
    pairs = [("base", "new"), ("new", "base")]
    assert seen == [x for k in range(5) for x in pairs[k % 2]], seen


def test_ab_a_side_that_dies_fails_alone(tmp_path, monkeypatch):
    monkeypatch.setenv("MIBENCH_TEST_PIDS", str(tmp_path / "pids"))
    records, _ = _lockstep(tmp_path, base_trouble=testing.segfault)
    assert records["base"].status == "failed" and "SIGSEGV" in records["base"].error.message
    assert records["new"].status == "ok" and len(records["new"].timed_s) == 3


def test_the_worker_side_imports_nothing_but_load_engine_from_the_engines(tmp_path):
    """`mibench ab` runs older revisions' engines under this harness: its worker side may
    take from `mibench.engines` only `load_engine` at import (the rest is looked up when
    used), or every revision without today's names would be unmeasurable."""
    import subprocess
    import sys

    def check(text):
        (tmp_path / "engines").mkdir(exist_ok=True)
        (tmp_path / "engines" / "__init__.py").write_text(text)
        return subprocess.run([sys.executable, "-m", "mibench.harness.run.bootstrap", "check",
                               str(tmp_path)], capture_output=True, text=True, timeout=120)

    ok = check("def load_engine(*args, **kwargs):\n    raise NotImplementedError\n")
    assert ok.returncode == 0, ok.stderr
    missing = check("")
    assert missing.returncode == 1 and "load_engine" in missing.stderr

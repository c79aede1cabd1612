"""Per-case memory: each case's own peak. JAX's `peak_bytes_in_use` only grows over a
process, so on a GPU or TPU every JAX case runs in a fresh worker; a peak that an earlier
case of the same process set is never passed off as a later case's (`device-bound`). On a
CPU the case's own figure is how far the resident set rose while it ran (`rss-rise`).

The device is faked (`testing.FakeDevice`): its peak only grows, as JAX's does. The
workload: a big case (8 GiB per call) then a small one (1 GiB per call), 2 GiB of weights.
"""

from __future__ import annotations

import functools

import pytest

from mibench.harness import testing
from mibench.harness.config import expand, load_config
from mibench.harness.host import memory
from mibench.harness.run import case as case_module
from mibench.harness.run.case import run_case
from mibench.harness.run.plan import plan_of
from mibench.harness.run.pool import EnginePool
from mibench.harness.run.runner import run
from mibench.harness.testing import FakeEngine, fixed_peak, write_config

GIB = 2**30
BYTES = {"weights": 2 * GIB, "packed": 8 * GIB, "single": 1 * GIB}
CONFIG = """
name: memory
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [5],
           delimiter: 151643}
runs: {warmup: 0, timed: 2, timeout_s: 60}
cases:
  - {engine: jax, mode: packed}
  - {engine: jax, mode: single}
"""
FACTORY = functools.partial(FakeEngine, device_bytes=BYTES)


@pytest.fixture
def fresh_process(monkeypatch):
    """This process as a fresh worker: an unused fake device, no case measured yet."""
    def reset():
        monkeypatch.setattr(testing, "DEVICE", testing.FakeDevice())
        monkeypatch.setattr(case_module, "_measured_here", [0])
    reset()
    return reset


def cases(tmp_path):
    return expand(load_config(write_config(tmp_path, CONFIG)))


def measure(case, pool):
    return run_case(case, pool, lambda dtype: 1e11, lambda label: None).metrics


def test_the_fake_device_peak_only_grows(fresh_process):
    engine = FACTORY()
    engine.score([1, 2], [[3]], [5], mode="packed", delimiter=9)
    engine.score([1, 2], [[3]], [5], mode="single", delimiter=9)
    assert memory.jax_device_peak(engine) == 10 * GIB  # the small call did not lower it


def test_a_small_case_after_a_big_one_records_its_own_peak_in_a_fresh_process(
        tmp_path, fresh_process):
    big, small = cases(tmp_path)
    first = measure(big, EnginePool(FACTORY))
    fresh_process()  # what the runner does on an accelerator: a new worker for the case
    second = measure(small, EnginePool(FACTORY))
    assert (first.peak_memory_bytes, first.peak_memory_source) == (10 * GIB, "device")
    assert (second.peak_memory_bytes, second.peak_memory_source) == (3 * GIB, "device")


def test_control_in_one_process_the_small_case_only_gets_an_upper_bound(
        tmp_path, fresh_process):
    """The control: without a fresh process the device reports the big case's peak, and
    the record says it is only an upper bound rather than the case's own."""
    big, small = cases(tmp_path)
    pool = EnginePool(FACTORY)
    first, second = measure(big, pool), measure(small, pool)
    assert (first.peak_memory_bytes, first.peak_memory_source) == (10 * GIB, "device")
    assert (second.peak_memory_bytes, second.peak_memory_source) == (10 * GIB, "device-bound")


def test_a_later_case_that_raises_the_peak_owns_it(tmp_path, fresh_process):
    big, small = cases(tmp_path)
    pool = EnginePool(FACTORY)
    first, second = measure(small, pool), measure(big, pool)
    assert (first.peak_memory_bytes, first.peak_memory_source) == (3 * GIB, "device")
    assert (second.peak_memory_bytes, second.peak_memory_source) == (10 * GIB, "device")


class ResettingEngine(FakeEngine):
    """A fake whose backend keeps a peak it can start over, as the torch engine's CUDA
    peak: `device_peak()` and `reset_device_peak()` (engines/contract.py)."""

    def reset_device_peak(self) -> bool:
        testing.DEVICE.peak = testing.DEVICE.in_use
        return True

    def device_peak(self) -> int:
        return testing.DEVICE.peak


def test_an_engine_that_resets_its_device_peak_gives_each_case_its_own_in_one_process(
        tmp_path, fresh_process):
    """Beside the control above: the same two cases in one process, on an engine that
    starts its peak over before each case, each record their own peak."""
    big, small = cases(tmp_path)
    pool = EnginePool(functools.partial(ResettingEngine, device_bytes=BYTES))
    first, second = measure(big, pool), measure(small, pool)
    assert (first.peak_memory_bytes, first.peak_memory_source) == (10 * GIB, "device")
    assert (second.peak_memory_bytes, second.peak_memory_source) == (3 * GIB, "device")


def test_on_a_cpu_a_case_records_what_it_adds_to_the_resident_set(tmp_path, fresh_process):
    import numpy as np

    held = []

    def allocate(engine):  # 64 MiB touched and freed in every call
        held.append(np.ones(64 * 2**20, np.uint8))
        held.clear()

    big, _ = cases(tmp_path)
    pool = EnginePool(functools.partial(FakeEngine, on_mode={"packed": allocate}))
    m = measure(big, pool)
    assert m.peak_memory_source == "rss-rise"
    assert 60 * 2**20 <= m.peak_memory_bytes < 1 * GIB  # pages malloc kept may be reused


def test_compile_counts_of_pooled_processes_add_up_only_when_counted():
    from mibench.harness.run.runner import _total

    assert _total([None, None]) is None and _total([0, None, 2]) == 2


@pytest.mark.slow  # engine worker processes
@pytest.mark.parametrize("fresh, small_peak, source", [
    (True, 3 * GIB, "device"),  # a worker per case: the small case's own peak
    (False, 10 * GIB, "device-bound"),  # the control: one worker, the big case's peak
])
def test_workers_per_case_give_each_case_its_own_device_peak(tmp_path, fresh, small_peak,
                                                              source):
    config = load_config(write_config(tmp_path, CONFIG))
    record = run(plan_of(config, out=tmp_path / "out", progress=False, engine_factory=FACTORY,
                         peak=fixed_peak(), workers=True, fresh_workers=fresh))
    big, small = (c.metrics for c in record.cases)
    assert (big.peak_memory_bytes, big.peak_memory_source) == (10 * GIB, "device")
    assert (small.peak_memory_bytes, small.peak_memory_source) == (small_peak, source)

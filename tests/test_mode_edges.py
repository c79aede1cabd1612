"""A mode's edges live on its `Mode` (engines/modes/registry.py): the speedup baseline
parity's `speedup` check and the report's model matrix read, and the options a call
resolves to (the engines' `resolved_options` delegate to it). Each test changes the
registry and sees the harness follow, so nothing names a mode behind its back."""

from __future__ import annotations

import contextlib
import dataclasses

import pytest

from mibench.engines import MODES
from mibench.engines.modes.registry import resolves_to
from mibench.harness.records import CaseRecord, Metrics, Summary
from mibench.harness.report import groups
from mibench.harness.run.speedup import speedup_checks


def test_every_baseline_is_a_registered_mode_and_every_gated_mode_has_one():
    for engine, modes in MODES.items():
        for mode in modes.values():
            if mode.speedup_baseline is not None:
                base_engine, base_mode = mode.speedup_baseline
                assert base_mode in MODES[base_engine], (engine, mode.name)
                assert MODES[base_engine][base_mode].speedup_baseline is None  # no chains
            assert not mode.speedup_gated or mode.speedup_baseline is not None
    gated = {(e, m.name) for e, modes in MODES.items() for m in modes.values()
             if m.speedup_gated}
    assert gated == {("jax", "packed")}  # mibench's own gate (docs/parity.md)
    assert groups.BASELINES == {("jax", "single")}


def record(case_id, mode, items_per_s, engine="jax"):
    tput = Summary(median=items_per_s, mean=items_per_s, min=items_per_s, max=items_per_s,
                   stdev=0.0, n=1)
    return CaseRecord(case_id=case_id, engine=engine, mode=mode, params={},
                      model={"path": "embedded:tiny", "dtype": "float32"}, topology={"tp": 1},
                      workload={"label_token_ids": [1], "num_items": 32, "query_tokens": 20},
                      runs={"warmup": 0, "timed": 1}, status="ok", started_at="t",
                      metrics=Metrics(throughput_items_per_s=tput))


@pytest.fixture
def patch_mode():
    """Replace one registered mode's fields for the test."""
    with contextlib.ExitStack() as stack:
        def patch(engine, name, **fields):
            moved = dataclasses.replace(MODES[engine][name], **fields)
            stack.enter_context(MODES[engine].entry(name, moved))
        yield patch


def test_parity_speedup_gates_the_modes_the_registry_gates(patch_mode):
    records = [record("s", "single", 10.0), record("p", "packed", 50.0),
               record("c", "chunked", 20.0)]
    assert [c.case_id for c in speedup_checks(records, 3.0)] == ["p"]
    patch_mode("jax", "chunked", speedup_gated=True)  # control: the registry decides
    out = {c.case_id: (c.against, c.status) for c in speedup_checks(records, 3.0)}
    assert out == {"p": ("s", "passed"), "c": ("s", "failed")}
    patch_mode("jax", "packed", speedup_gated=False)
    assert [c.case_id for c in speedup_checks(records, 3.0)] == ["c"]


def test_report_brackets_follow_the_registrys_baseline(patch_mode):
    case = record("p", "packed", 50.0).model_copy()
    assert groups.speedup_baseline(case) == ("jax", "single")
    assert groups.speedup_baseline(record("s", "single", 1.0)) is None
    assert groups.speedup_baseline(record("x", "gone", 1.0)) is None  # an old artifact's
    patch_mode("jax", "packed", speedup_baseline=None)
    assert groups.speedup_baseline(case) is None


def test_engines_resolve_options_through_their_mode(patch_mode):
    from mibench.engines.torch_engine import TorchEngine

    assert TorchEngine.resolved_options(None, "single", {}) == {"attention": "eager"}
    assert TorchEngine.resolved_options(None, "prefill_extend", {}) == {"attention": "sdpa"}
    assert TorchEngine.resolved_options(None, "gone", {}) == {}
    patch_mode("torch", "single", resolves=resolves_to(attention="flash"))  # control
    assert TorchEngine.resolved_options(None, "single", {}) == {"attention": "flash"}


def test_jax_resolves_dense_to_masked_xla_and_others_by_backend(patch_mode):
    from mibench.engines.jax_engine import JaxEngine

    class Engine:  # what `resolved_attention` reads of a JaxEngine
        def attention(self, options):
            return type("P", (), {"name": f"path-{options['attention']}"})()

    engine = Engine()
    assert JaxEngine.resolved_options(engine, "packed", {"mask": "dense"}) == {
        "attention": "xla-masked"}
    assert JaxEngine.resolved_options(engine, "packed", {}) == {"attention": "path-auto"}
    assert JaxEngine.resolved_options(engine, "single", {"attention": "xla"}) == {
        "attention": "path-xla"}
    assert JaxEngine.resolved_options(engine, "gone", {}) == {}
    patch_mode("jax", "single", resolves=None)  # control: a mode that says nothing
    assert JaxEngine.resolved_options(engine, "single", {}) == {}

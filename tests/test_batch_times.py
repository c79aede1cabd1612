"""Per-batch times of prefill_extend: one synced pass after the timed runs, each extend
batch's wall time recorded (`batch_s`, `metrics.batch_ms`: p50, p99, max), so a tail pause
of one batch is a number; the report's batch table flags it."""

from __future__ import annotations

import json

import pytest

from mibench.engines import MODES, load_engine
from mibench.harness.config import load_config
from mibench.harness.records import read_artifact
from mibench.harness.records.summaries import latency_of
from mibench.harness.report import build_context, render
from mibench.harness.report.tables import batch_table, rows_of
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run
from mibench.harness.testing import fixed_peak, write_config

# the shapes of the engine test above (query 32, 10 items of 3 tokens, batches of 4)
CONFIG = """
name: batches
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 32, num_items: 10, item_tokens: 3, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 2}
cases:
  - {engine: jax, mode: prefill_extend, mask: segment, extend_batch_size: 4}
  - {engine: jax, mode: packed, mask: segment}
"""


@pytest.fixture(scope="module")
def engine():
    """This module's own, not the session's jax_tiny: the run below closes the engine it is
    given (run/pool.py), which left jax_tiny without weights for every later test."""
    return load_engine("jax", model="embedded:tiny")


@pytest.mark.slow
def test_each_extend_batch_is_timed_in_order(engine):
    q, items = list(range(5, 37)), [[7, 8, 9]] * 10
    for mask in ("dense", "segment"):
        times = engine.batch_times(q, items, [198], mode="prefill_extend", delimiter=151643,
                                   extend_batch_size=4, mask=mask)
        assert len(times) == 3 and all(t > 0 for t in times)  # 4 + 4 + 2 items
    # a mode without batches has none; a bad option is the mode's own error
    assert engine.batch_times(q, items, [198], mode="packed", delimiter=151643) is None
    with pytest.raises(Exception, match="extend_batch_size"):
        engine.batch_times(q, items, [198], mode="prefill_extend", delimiter=151643,
                           extend_batch_size=0)
    assert [m for m in MODES["jax"].values() if m.batch_timer] == [MODES["jax"]["prefill_extend"]]


@pytest.mark.slow
def test_a_run_records_the_batch_pass_apart_from_the_timed_runs(engine, tmp_path):
    # the runner's own path (the one a worker runs) with the real engine, in process: the
    # module's engine, so the shapes the test above compiled are not compiled again
    plan = plan_of(load_config(write_config(tmp_path, CONFIG)), out=tmp_path / "out",
                   progress=False, engine_factory=lambda *key: engine, peak=fixed_peak())
    assert exit_code(run(plan)) == 0
    (path,) = (tmp_path / "out").glob("*.json")
    rec = read_artifact(path)
    by = {c.case_id: c for c in rec.cases}
    # the runner passes the case's options through (both masks' batches: the test above)
    case = by["jax/prefill_extend/mask=segment/extend_batch_size=4/tp=1"]
    assert len(case.batch_s) == 3 and len(case.timed_s) == 2
    assert case.metrics.batch_ms.n == 3
    assert case.metrics.batch_ms.max_ms == pytest.approx(1000 * max(case.batch_s))
    packed = by["jax/packed/mask=segment/tp=1"]
    assert packed.batch_s is None and packed.metrics.batch_ms is None
    assert "batch_s" in json.loads(path.read_text())["cases"][0]
    text = render(build_context([rec]))
    assert "### Batches, one synced pass after the timed runs" in text


def test_a_slow_batch_is_flagged_with_its_time():
    from pathlib import Path

    rec = read_artifact(Path(__file__).parent / "data" / "reports" / "new.json")
    case = rec.cases[0]
    even = [0.010] * 40
    case.batch_s = even
    case.metrics.batch_ms = latency_of([1000 * t for t in even])
    table = batch_table(rows_of([rec]))
    assert table.rows[0][-1] == "-" and table.rows[0][5] == "1.00x"  # control: no pause
    paused = even[:20] + [0.050] + even[21:]
    case.batch_s = paused
    case.metrics.batch_ms = latency_of([1000 * t for t in paused])
    row = batch_table(rows_of([rec])).rows[0]
    assert row[1:6] == ["40", "10.000", "50.000", "50.000", "5.00x"]
    assert row[-1] == "**batch 21: 50 ms**"

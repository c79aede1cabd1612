"""Speedups between modes whatever the item counts: a `single` timed on fewer items (every
shipped TPU/GPU/CPU config does that) still gets its ratios, each marked as a ratio of
items/s on different N, in the speedups table and in the model matrix."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from mibench.harness.records import read_artifact
from mibench.harness.report import build_context, render
from mibench.harness.report.groups import model_matrix, speedups
from mibench.harness.report.tables import rows_of

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


@pytest.fixture
def v6e1_like():
    """new.json at tp 1, its `single` re-timed on 64 items (as v6e1.yaml does) and its torch
    single on 16: items/s of single kept, so the expected ratios are known from the data."""
    rec = read_artifact(DATA / "new.json").model_copy(deep=True)
    rec.cases = [c for c in rec.cases if c.topology.tp == 1]
    for case_id, n in (("jax/single/tp=1", 64), ("torch/single/tp=1", 16)):
        case = next(c for c in rec.cases if c.case_id == case_id)
        per_item = [t / case.workload.num_items for t in case.timed_s]
        case.workload = case.workload.model_copy(update={"num_items": n})
        make.set_times(case, [p * n for p in per_item])
    return rec


def _thr(rec, case_id):
    c = next(c for c in rec.cases if c.case_id == case_id)
    return c.metrics.throughput_items_per_s.median


def test_speedups_shown_when_item_counts_differ(v6e1_like):
    tables = speedups(rows_of([v6e1_like]))
    assert len(tables) == 1  # one context: the workload but N
    t = tables[0]
    assert t.header[:3] == ["Mode (fastest options)", "Items", "Items/s"]
    assert "vs jax/single (N=64)" in t.header
    assert t.note and "different item counts" in t.note
    row = next(r for r in t.rows if r[0].startswith("jax/packed (mask=segment)"))
    col = t.header.index("vs jax/single (N=64)")
    want = _thr(v6e1_like, "jax/packed/mask=segment/tp=1") / _thr(v6e1_like, "jax/single/tp=1")
    assert row[1] == "500" and row[col] == f"{want:.2f}x (N 500 / 64)"
    # packed against prefill_extend: both on 500 items, so no N mark
    pe = next(r for r in t.rows if r[0].startswith("jax/prefill_extend"))
    packed_col = next(i for i, h in enumerate(t.header) if h.startswith("vs jax/packed"))
    assert pe[packed_col].endswith("x") and "N " not in pe[packed_col]


def test_same_n_keeps_the_plain_table():
    rec = read_artifact(DATA / "new.json")
    for t in speedups(rows_of([rec])):
        assert "Items" not in t.header and t.note is None
        assert all("(N " not in c for row in t.rows for c in row)


def test_report_shows_the_section_with_different_n(v6e1_like):
    text = render(build_context([v6e1_like]))
    assert "## Speedups between modes" in text and "(N 500 / 64)" in text
    assert "## Model matrix" in text  # the item counts differ, so it is shown too


def test_model_matrix_ratio_against_single_at_another_n(v6e1_like):
    t = model_matrix(rows_of([v6e1_like]))
    row = next(r for r in t.rows if r[1] == "jax/packed (mask=segment)")
    cell = row[t.header.index("N=500")]
    want = _thr(v6e1_like, "jax/packed/mask=segment/tp=1") / _thr(v6e1_like, "jax/single/tp=1")
    assert cell.endswith(f"({want:.2f}x vs N=64)")
    single = next(r for r in t.rows if r[1] == "jax/single")
    assert "x" not in single[t.header.index("N=64")]  # single is not compared with itself
    assert "vs N=b" in t.note


def test_a_different_workload_is_never_compared(v6e1_like):
    """Control: change the query length of single and no ratio crosses to it."""
    case = next(c for c in v6e1_like.cases if c.case_id == "jax/single/tp=1")
    case.workload = case.workload.model_copy(
        update={"query_tokens": case.workload.query_tokens + 1})
    tables = speedups(rows_of([v6e1_like]))
    assert not any("jax/single" in h for t in tables for h in t.header)
    t = model_matrix(rows_of([v6e1_like]))
    row = next(r for r in t.rows if r[1] == "jax/packed (mask=segment)")
    assert "x" not in row[t.header.index("N=500")]


CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_every_shipped_config_gets_its_speedups(path):
    """Each shipped config, its cases given synthetic timings (single: 0.1 s an item, the
    others 0.05 s + 0.01 s an item): every jax/torch engine/mode of a (model, dtype, tp)
    appears in that context's speedups table, whatever item counts the config gives it."""
    import numpy as np

    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.records import RunRecord

    config = load_config(path)
    cases = [c for c in expand(config) if c.engine in ("jax", "torch")
             and c.workload.num_items is not None]
    rec = RunRecord(run_id="r", started_at="2026-01-01T00:00:00Z", config=config.resolved(),
                    config_sha256=config.sha256(), provenance=make.provenance(path.name, "1"))
    rng = np.random.default_rng(0)
    for c in cases:
        n = c.workload.num_items
        rec.cases.append(make.case_record(c, 0.1 * n if c.mode == "single" else 0.05 + 0.01 * n,
                                          rng, "2026-01-01T00:00:00Z"))
    contexts: dict[tuple, set[str]] = {}
    for c in cases:
        contexts.setdefault((c.model, c.dtype, c.tp, c.workload.query_tokens,
                             str(c.workload.item_tokens)), set()).add(f"{c.engine}/{c.mode}")
    tables = speedups(rows_of([rec]))
    for modes in contexts.values():
        if len(modes) < 2:
            continue
        shown = [{h.removeprefix("vs ").split(" ")[0] for h in t.header[1:]
                  if h.startswith("vs ")} | {r[0].split(" ")[0] for r in t.rows}
                 for t in tables]
        assert any(modes <= s for s in shown), (modes, shown)

"""The roofline bound: mibench's formulas for one pass (every layer counted, the engine's
padding), the chips' public peaks, the resource that bounds a case, `compare` judging the
bound exactly, and the reports that show it beside the seeds' figures and measurements."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from mibench.engines import MODES, Shape, model_facts
from mibench.engines.modes.work import extend_batches
from mibench.harness.compile.roofline import bound
from mibench.harness.compile.runner import resolve_target
from mibench.harness.judge.compile_compare import compare_compile
from mibench.harness.records.compile import COMPILE_SCHEMA, CompileRecord, CompileTarget

DATA = Path(__file__).parent / "data"
STORED = DATA / "compile-tiny-v6e-1.json"
Q06 = model_facts("embedded:qwen3-0.6b")
SEEDS = Shape(2001, 500, 20, model=Q06, dtype="bfloat16")  # query + delimiter, 500 x 20


def work(mode: str, **options):
    return MODES["jax"][mode].work_per_pass(SEEDS, options)


def layer_params(m) -> int:
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    return m.hidden_size * (q + 2 * kv) + q * m.hidden_size + 3 * m.hidden_size * \
        m.intermediate_size


def test_prefill_extend_reads_the_weights_and_the_cache_once_per_batch():
    # 500 items in batches of 12: 41 full, the last 8 padded to 8 (paddings 1..12)
    assert extend_batches(500, 12, list(range(1, 13))) == [12] * 41 + [8]
    assert extend_batches(500, 16, [1, 2, 4, 8, 16]) == [16] * 31 + [4]
    w = work("prefill_extend", extend_batch_size=12, precompile_bs=list(range(1, 13)))
    weights = Q06.num_layers * layer_params(Q06) * 2  # bfloat16
    cache = 2 * Q06.num_layers * 2048 * Q06.num_kv_heads * Q06.head_dim * 2
    # 1 prefill + 42 extend calls read every layer's weights; each extend reads the cache
    assert w.hbm_bytes > 43 * weights + 42 * cache
    dense = work("prefill_extend", extend_batch_size=12, precompile_bs=list(range(1, 13)),
                 mask="dense")
    # the dense mask: every batch's [B, 20, 2048 + 20] booleans, copied every pass
    assert dense.mask_bytes == (41 * 12 + 8) * 20 * (2048 + 20)
    assert dense.flops > w.flops and dense.hbm_bytes > w.hbm_bytes


def test_packed_dense_materialises_t_squared_scores():
    dense, segment = work("packed", mask="dense"), work("packed", mask="segment")
    # prefix bucket + the items' region (500 x 21 + 1 -> 10752, in whole bands of 20)
    t = 2048 + 10760
    assert dense.mask_bytes == t * t
    scores = 2 * Q06.num_layers * Q06.num_heads * t * t * 4
    assert dense.hbm_bytes > scores > 100 * segment.hbm_bytes
    assert segment.mask_bytes == 0
    # chunk_size 512 of 500 items is one chunk: the packed sequence itself
    assert work("chunked", chunk_size=512, mask="dense") == dense


def test_single_recomputes_the_query_for_every_item():
    single, extend = work("single"), work("prefill_extend", extend_batch_size=12)
    per_item = 2 * Q06.num_layers * layer_params(Q06) * 2048  # 2001 + 20 padded to 2048
    assert single.flops > 500 * per_item > 20 * extend.flops


def test_bound_names_the_resource_and_is_items_over_the_slower_time():
    t = resolve_target("v6e-4", None)
    assert (t.peak_flops_per_chip, t.hbm_bandwidth_per_chip) == (918e12, 1638e9)
    assert "cloud.google.com/tpu/docs/v6e" in t.peak_flops_source
    b = bound(918e12 * 4, 1638e9, 0.0, 100, t)  # 1 s of compute, 0.25 s of memory
    assert (b.bound, b.compute_s, b.memory_s) == ("compute", 1.0, 0.25)
    assert b.items_per_s == 100
    m = bound(1.0, 1638e9 * 8, 0.0, 100, t)
    assert m.bound == "memory" and m.items_per_s == pytest.approx(50)
    assert resolve_target("v5e-4", None).hbm_bandwidth_per_chip == 819e9
    assert bound(1.0, 1.0, 0.0, 0, t) is None


def with_roofline(data: dict, scale: float = 1.0) -> dict:
    """The stored compile/1 artifact with a roofline on every compiled case (it predates
    them), as the compile/2 artifact it then is."""
    data = {**data, "schema": COMPILE_SCHEMA}
    target = CompileTarget.model_validate(data["target"] | {
        "peak_flops_per_chip": 918e12, "hbm_bandwidth_per_chip": 1638e9})
    for c in data["cases"]:
        if c.get("compile"):
            b = bound(1e9, 1e8 / scale, 0.0, 6, target)
            c["compile"]["roofline"] = b.model_dump()
    return data


def test_compare_judges_the_bound_exactly():
    base = CompileRecord.model_validate(with_roofline(json.loads(STORED.read_text())))
    same = compare_compile(base, base, 0.05)
    assert same.exit_code == 0 and not any(d.changes for d in same.cases)
    lower = CompileRecord.model_validate(with_roofline(json.loads(STORED.read_text()), 0.9))
    d = next(x for x in compare_compile(base, lower, 0.05).cases
             if x.case_id == "jax/single/tp=1")
    assert d.regressions and "roofline items/s" in d.regressions[0]
    assert "-10.00%" in d.regressions[0] and "< -5%" in d.regressions[0]
    higher = CompileRecord.model_validate(with_roofline(json.loads(STORED.read_text()), 1.2))
    up = compare_compile(base, higher, 0.05)
    assert up.exit_code == 0 and any("roofline items/s" in c for x in up.cases
                                     for c in x.changes)
    small = CompileRecord.model_validate(with_roofline(json.loads(STORED.read_text()), 0.99))
    assert compare_compile(base, small, 0.05).exit_code == 0  # within the threshold


def test_the_compile_report_sets_the_seeds_beside_the_bound(tmp_path):
    from mibench.harness.config.references import load_references
    from mibench.harness.report.compile import render_fit

    rec = CompileRecord.model_validate(with_roofline(json.loads(STORED.read_text())))
    refs = load_references(Path(__file__).parents[1] / "configs" / "references" / "seeds.yaml")
    text = render_fit([rec], refs)
    assert "## Roofline: what the chips allow" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| jax/single/tp=1 | v6e-1 |"))
    assert row.endswith("| memory |")
    seed = next(ln for ln in text.splitlines() if ln.startswith("| seed000-single |"))
    assert "jax/single/tp=1" in seed and "model tiny, not qwen3-0.6b" in seed
    # the dense mask's host->device bytes per pass: the compile's own count, T x T
    dense = next(ln for ln in text.splitlines()
                 if ln.startswith("| jax/packed/mask=dense/tp=1 | ok |"))
    assert "0.02 MiB" in dense  # 128 x 128 booleans
    assert not math.isnan(rec.cases[0].compile.roofline.items_per_s)

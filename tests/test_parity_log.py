"""Parity judges log scores (docs/parity.md). With `apply_softmax: false`, as in v6e1.yaml,
scores are full-vocabulary probabilities around 1e-5, so the old absolute tolerances passed
anything: plain against delimited semantics, items in the wrong order. On the real engines
and the embedded `tiny` model (whose scores differ between items), those comparisons now
fail the `engines` and `modes` checks, and the right ones pass."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mibench.harness.config import load_config
from mibench.harness.config.keys import EngineKey
from mibench.harness.config.matrix import expand
from mibench.harness.run import parity
from mibench.harness.run.pool import EnginePool
from mibench.harness.testing import write_config

# v6e1.yaml's shape (delimiter 151643, label 198, apply_softmax false, random tokens) on
# `tiny`, with a small query and few items so that it stays fast
V6E1_TINY = """
    name: v6e1-tiny
    model: {path: "embedded:tiny", dtype: float32}
    topology: {tp: 1}
    workload: {query_tokens: 48, num_items: 6, item_tokens: 6, tokens: random,
               label_token_ids: [198], delimiter: 151643, apply_softmax: false, seed: 0}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: segment}
      - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
      - {engine: torch, mode: single}
    parity:
      reference: {engine: torch, mode: single, dtype: float32}
      checks: [modes, engines]
"""
OLD_ENGINES_TOL = 1e-4  # the float32 `engines` gate before log scores, on |a - b|


class Plain:
    """An engine whose `single` drops the delimiter: plain semantics, where the run asked
    for delimited."""

    def __init__(self, engine):
        self.engine = engine

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def score(self, query, items, labels, mode="single", delimiter=None, **kw):
        return self.engine.score(query, items, labels, mode=mode,
                                 delimiter=None if mode == "single" else delimiter, **kw)


class Reversed(Plain):
    """An engine whose `modes` hand the scores back in reverse item order."""

    def __init__(self, engine, modes):
        super().__init__(engine)
        self.reversed_modes = modes

    def score(self, query, items, labels, mode="single", **kw):
        result = self.engine.score(query, items, labels, mode=mode, **kw)
        if mode not in self.reversed_modes:
            return result
        return dataclasses.replace(result, scores=result.scores[::-1])


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    return load_config(write_config(tmp_path_factory.mktemp("c"), V6E1_TINY), [])


def parity_of(config, jax_engine, torch_engine):
    engines = {"jax": jax_engine, "torch": torch_engine}
    pool = EnginePool(lambda name, model, dtype, tp: engines[name])
    record = parity.new_record(config)
    parity.check_group(config, pool, expand(config), record)
    return {(c.check, c.case_id): c for c in record.checks}, record, pool


def direct(engine, config, pool, delimiter, reverse=False, **kw):
    """The first parity request scored by calling the engine itself (not the harness)."""
    spec = parity.parity_workload(config)
    (req,) = pool.requests(EngineKey("jax", "embedded:tiny", "float32", 1), spec)
    items = [list(i) for i in req.items]
    s = np.asarray(engine.score(list(req.query), items, [198], delimiter=delimiter,
                                apply_softmax=False, **kw).scores)
    return s[::-1] if reverse else s


@pytest.mark.slow
def test_the_right_comparisons_pass(config, jax_tiny, torch_tiny):
    checks, record, pool = parity_of(config, jax_tiny, torch_tiny)
    assert record.passed and len(checks) == 3
    for (check, _), c in checks.items():
        assert c.status == "passed" and c.tolerance == parity.TOL[check]["float32"]
        assert c.max_log_diff <= c.tolerance and c.abs_tolerance is None
    # the scores are tiny probabilities that differ between items: the check proves something
    single = direct(jax_tiny, config, pool, 151643)
    assert single.max() < 1e-3 and np.ptp(np.log(single)) > 0.5
    want = np.abs(np.log(single) - np.log(direct(torch_tiny, config, pool, 151643))).max()
    assert checks[("engines", "jax/single/tp=1")].max_log_diff == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("wrong", [pytest.param("reference", marks=pytest.mark.slow), "single"])
def test_plain_semantics_against_delimited_fails(config, jax_tiny, torch_tiny, wrong):
    """`reference`: the torch reference scored without the delimiter (engines fails);
    `single`: jax `single` without it, which the other modes are compared with (modes
    fails). Plain and delimited scores are tens of percent apart (0.46 in log here),
    and only about 2e-6 apart absolutely."""
    jax_engine = Plain(jax_tiny) if wrong == "single" else jax_tiny
    torch_engine = Plain(torch_tiny) if wrong == "reference" else torch_tiny
    checks, record, pool = parity_of(config, jax_engine, torch_engine)
    assert not record.passed
    failed = {k for k, c in checks.items() if c.status == "failed"}
    if wrong == "reference":
        assert failed == {("engines", "jax/single/tp=1")}
    else:  # jax single is plain: the modes fail against it, and it fails the reference
        assert failed == set(checks)
    delimited = direct(jax_tiny, config, pool, 151643)
    plain = direct(jax_tiny, config, pool, None)
    want = np.abs(np.log(delimited) - np.log(plain)).max()  # independent of the harness
    assert want > 0.1
    for key in failed:
        c = checks[key]
        assert c.max_log_diff == pytest.approx(want, rel=1e-2)  # jax vs torch: ~1e-5 apart
        assert c.max_log_diff > 100 * c.tolerance
        assert c.max_abs_diff < OLD_ENGINES_TOL  # what an absolute gate could not see


@pytest.mark.parametrize("which", ["modes", "engines"])
def test_reversed_items_fail(config, jax_tiny, torch_tiny, which):
    if which == "modes":  # packed and prefill_extend hand back reversed scores
        jax_engine = Reversed(jax_tiny, {"packed", "prefill_extend"})
        torch_engine, bad = torch_tiny, {("modes", "jax/packed/mask=segment/tp=1"),
                                         ("modes", "jax/prefill_extend/extend_batch_size=4/tp=1")}
    else:  # the reference's single reversed
        jax_engine, torch_engine = jax_tiny, Reversed(torch_tiny, {"single"})
        bad = {("engines", "jax/single/tp=1")}
    checks, record, pool = parity_of(config, jax_engine, torch_engine)
    assert {k for k, c in checks.items() if c.status == "failed"} == bad
    assert {k for k, c in checks.items() if c.status == "passed"} == set(checks) - bad
    single = direct(jax_tiny, config, pool, 151643)
    want = np.abs(np.log(single) - np.log(single[::-1])).max()
    assert want > 0.1
    for key in bad:
        c = checks[key]
        assert c.max_log_diff == pytest.approx(want, rel=1e-2)
        assert c.max_log_diff > 100 * c.tolerance
        assert c.max_abs_diff < OLD_ENGINES_TOL  # what an absolute gate could not see


def test_judge_bfloat16_softmax_zeros_and_nans():
    """The verdict itself: the log bound, the absolute bound of bfloat16 with softmax, a
    zero score (an underflow) and NaN."""
    ok = parity.diff([[0.5, 0.5]], [[0.515, 0.485]])
    assert ok.max_log == pytest.approx(-np.log(0.485 / 0.5))
    assert ok.max_abs == pytest.approx(0.015) and ok.max_rel == pytest.approx(0.015 / 0.485)
    tol, abs_tol = parity.tolerances("modes", "bfloat16", apply_softmax=True)
    assert (tol, abs_tol) == (parity.TOL["modes"]["bfloat16"], 2e-2)
    assert parity.tolerances("modes", "bfloat16", apply_softmax=False)[1] is None
    assert parity.tolerances("modes", "float32", apply_softmax=True)[1] is None
    assert parity.judge("modes", "a", "b", ok, tol, abs_tol).status == "passed"
    far = parity.diff([[0.5, 0.5]], [[0.53, 0.47]])  # 6% in log: within 1e-1, not in abs
    assert far.max_log < tol
    assert parity.judge("modes", "a", "b", far, tol, abs_tol).status == "failed"
    assert parity.judge("modes", "a", "b", far, tol, None).status == "passed"
    zeros = parity.diff([[0.0, 1e-5]], [[0.0, 1e-5]])
    assert zeros.max_log == 0.0
    one_zero = parity.diff([[0.0]], [[1e-5]])
    assert np.isfinite(one_zero.max_log) and one_zero.max_log > 600
    nan = parity.diff([[float("nan")]], [[1e-5]])
    c = parity.judge("engines", "a", "b", nan, 1e-4)
    assert c.status == "failed" and c.error == "1 NaN scores"
    same = parity.diff([[1e-5, 2e-5]], [[1e-5, 2e-5]])
    assert parity.judge("isolation", "a", "b", same, 0.0).status == "passed"
    moved = parity.diff([[1e-5, 2e-5]], [[1e-5, np.nextafter(2e-5, 1)]])
    assert parity.judge("isolation", "a", "b", moved, 0.0).status == "failed"

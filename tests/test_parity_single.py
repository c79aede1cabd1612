"""JAX `single` against the PyTorch reference, on every architecture and in both dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DELIM, LABELS, random_request

from mibench.engines import load_engine
from mibench.harness.run.parity import ABS_TOL_SOFTMAX, TOL


def _scores(engine, query, items, **kw):
    return np.asarray(engine.score(query, items, LABELS, mode="single", **kw).scores)


def _assert_close(a, b, dtype="float32"):
    """The `engines` parity check's bound on log scores (docs/parity.md): an absolute
    1e-4 alone would pass on any two sets of tiny full-vocabulary probabilities."""
    assert a.shape == b.shape
    assert np.abs(np.log(a) - np.log(b)).max() <= TOL["engines"][dtype]


@pytest.mark.parametrize("apply_softmax", [True, False])
@pytest.mark.parametrize("delimiter", [DELIM, None])
def test_jax_matches_torch_on_tiny(jax_tiny, torch_tiny, apply_softmax, delimiter):
    query, items = random_request(1, num_items=6)
    a = _scores(jax_tiny, query, items, apply_softmax=apply_softmax, delimiter=delimiter)
    b = _scores(torch_tiny, query, items, apply_softmax=apply_softmax, delimiter=delimiter)
    assert a.shape == (6, 2)
    _assert_close(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny-qwen2", "tiny-llama", "tiny-h128"])
def test_jax_matches_torch_on_other_architectures(preset):
    jax_engine = load_engine("jax", model=f"embedded:{preset}")
    torch_engine = load_engine("torch", model=f"embedded:{preset}")
    query, items = random_request(2, num_items=4, vocab=128000)
    for apply_softmax in (True, False):
        for delimiter in (128001 if preset == "tiny-llama" else DELIM, None):
            a = _scores(jax_engine, query, items, apply_softmax=apply_softmax,
                        delimiter=delimiter)
            b = _scores(torch_engine, query, items, apply_softmax=apply_softmax,
                        delimiter=delimiter)
            _assert_close(a, b)


@pytest.mark.slow
def test_bfloat16_close_to_float32_reference(torch_tiny):
    query, items = random_request(3, num_items=16)
    bf16 = load_engine("jax", model="embedded:tiny", dtype="bfloat16")
    for apply_softmax in (True, False):
        a = _scores(bf16, query, items, apply_softmax=apply_softmax, delimiter=DELIM)
        b = _scores(torch_tiny, query, items, apply_softmax=apply_softmax, delimiter=DELIM)
        _assert_close(a, b, "bfloat16")
        if apply_softmax:  # probabilities near 0.5: the absolute bound means something
            assert np.abs(a - b).max() <= ABS_TOL_SOFTMAX["bfloat16"]


@pytest.mark.parametrize("preset", ["tiny", "tiny-h128"])  # tiny-h128: sglang-jax's tests
def test_scores_are_discriminative(jax_tiny, preset):
    """Random weights must still tell items apart, or parity checks prove nothing."""
    engine = jax_tiny if preset == "tiny" else load_engine("jax", model=f"embedded:{preset}")
    query, items = random_request(4, query_len=64, num_items=32)
    s = _scores(engine, query, items, apply_softmax=True, delimiter=DELIM)
    assert s[:, 0].max() - s[:, 0].min() >= 0.3
    np.testing.assert_allclose(s.sum(axis=1), 1.0, atol=1e-5)


def test_text_input_equals_token_ids(jax_tiny):
    tok = jax_tiny.tokenizer
    query, items = "Is this a good movie for a rainy day?", ["Casablanca", "Jaws 2", "Up"]
    by_text = _scores(jax_tiny, query, items, apply_softmax=True, delimiter=DELIM)
    ids = [tok.encode(t, add_special_tokens=False) for t in (query, *items)]
    by_ids = _scores(jax_tiny, ids[0], ids[1:], apply_softmax=True, delimiter=DELIM)
    np.testing.assert_array_equal(by_text, by_ids)

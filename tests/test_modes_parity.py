"""Every mode and mask of the JAX engine equals serial scoring (`single`) of the same
semantics (delimited and plain) and the PyTorch reference. With apply_softmax=False the
scores are tiny probabilities (~1e-5), so they are also compared as log scores, where the
tolerance means something."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DELIM, LABELS, SEMANTICS_TIERED, example_id, mode_examples, tiered

# every example the registry declares (7 items: chunks of 3 leave 1; extend batches of 3
# leave 1, of 4 with precompile_bs [4] pad the last 3 to 4), and chunks of one item
MODE_CASES = mode_examples(skip=("single",)) + [("chunked", {"chunk_size": 1})]
# the Pallas TPU splash kernel, in interpret mode on this CPU, end to end (slow)
PALLAS_CASES = [
    ("single", {"attention": "pallas"}),
    ("packed", {"mask": "segment", "attention": "pallas"}),
    ("chunked", {"chunk_size": 4, "schedule": "sequential", "attention": "pallas"}),
    ("prefill_extend", {"extend_batch_size": 3, "attention": "pallas"}),
]
MODE_CASES += [pytest.param(m, o, marks=pytest.mark.slow) for m, o in PALLAS_CASES]
IDS = [example_id(m, o) for m, o in mode_examples(skip=("single",))] + [
    "chunked-chunk_size1"] + [example_id(m, o) for m, o in PALLAS_CASES]


SEMANTICS = ("delimited", "plain")


def scores(engine, req, mode="single", delimiter=DELIM, **kw):
    query, items = req
    return np.asarray(engine.score(query, items, LABELS, mode=mode, delimiter=delimiter,
                                   **kw).scores)


def assert_close(got, want, abs_tol, log_tol):
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=abs_tol)
    np.testing.assert_allclose(np.log(got), np.log(want), rtol=0, atol=log_tol)


@pytest.fixture(scope="module")
def base(make_request):
    """7 items of lengths 1..8 (different lengths), a 40-token query."""
    return make_request(11, query_len=40, num_items=7, item_len=(1, 9))


@pytest.fixture(scope="module")
def single_ref(jax_tiny, base):
    return {s: scores(jax_tiny, base, semantics=s) for s in SEMANTICS}


@pytest.fixture(scope="module")
def torch_ref(torch_tiny, base):
    return {s: scores(torch_tiny, base, semantics=s) for s in SEMANTICS}


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_single_matches_torch(single_ref, torch_ref, semantics):
    assert_close(single_ref[semantics], torch_ref[semantics], 1e-4, 1e-3)


def test_the_semantics_give_different_scores(single_ref):
    gap = np.abs(np.log(single_ref["plain"]) - np.log(single_ref["delimited"]))
    assert gap.max() > 1e-2  # a thousand times the tolerance below


@pytest.mark.parametrize("semantics", SEMANTICS_TIERED)
@pytest.mark.parametrize("mode,opts", tiered(MODE_CASES), ids=IDS)
def test_mode_matches_single_and_torch(jax_tiny, base, single_ref, torch_ref, mode, opts,
                                       semantics):
    got = scores(jax_tiny, base, mode, semantics=semantics, **opts)
    assert_close(got, single_ref[semantics], 1e-5, 1e-5)  # log scores too: docs/parity.md
    assert_close(got, torch_ref[semantics], 1e-4, 1e-3)
    # and the scores are discriminative, so the comparison proves something
    assert np.ptp(np.log(got[:, 0])) > 0.1


def test_an_attention_path_this_machine_lacks_is_a_clear_error(jax_tiny, base):
    from mibench.errors import MibenchError

    for value in ("cudnn", "flash"):  # cuDNN needs a GPU; `flash` is no path at all
        with pytest.raises(MibenchError) as e:
            scores(jax_tiny, base, "prefill_extend", attention=value)
        assert e.value.field == "attention"
    with pytest.raises(MibenchError, match="schedule"):
        scores(jax_tiny, base, "chunked", schedule="later")


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("mode,opts", [("packed", {"mask": "segment"}),
                                       ("chunked", {"chunk_size": 2}),
                                       ("prefill_extend", {"extend_batch_size": 2})])
def test_one_item(jax_tiny, make_request, mode, opts, semantics):
    req = make_request(12, query_len=33, num_items=1, item_len=5)
    assert_close(scores(jax_tiny, req, mode, semantics=semantics, **opts),
                 scores(jax_tiny, req, semantics=semantics), 1e-5, 1e-4)


@pytest.mark.parametrize("delimiter", [None, DELIM])  # plain needs none; given, it is unused
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_prefill_extend_plain_semantics(jax_tiny, torch_tiny, base, single_ref, batch,
                                        delimiter):
    want = scores(jax_tiny, base, delimiter=None, semantics="plain")
    np.testing.assert_array_equal(want, single_ref["plain"])  # the delimiter plays no part
    got = scores(jax_tiny, base, "prefill_extend", delimiter=delimiter, semantics="plain",
                 extend_batch_size=batch)
    assert_close(got, want, 1e-5, 1e-5)
    assert_close(got, scores(torch_tiny, base, delimiter=None, semantics="plain"), 1e-4, 1e-3)


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize("mode,opts", [("packed", {"mask": "segment"}),
                                       ("chunked", {"chunk_size": 3, "mask": "dense"}),
                                       ("prefill_extend", {"extend_batch_size": 5})])
def test_apply_softmax(jax_tiny, base, mode, opts, semantics):
    want = scores(jax_tiny, base, apply_softmax=True, semantics=semantics)
    got = scores(jax_tiny, base, mode, apply_softmax=True, semantics=semantics, **opts)
    assert_close(got, want, 1e-5, 1e-5)


@pytest.fixture(scope="module")
def jax_tiny_bf16():
    from mibench.engines import load_engine

    return load_engine("jax", model="embedded:tiny", dtype="bfloat16")


@pytest.mark.slow
@pytest.mark.parametrize("mode,opts", [("packed", {"mask": "segment"}),
                                       ("packed", {"mask": "dense"}),
                                       ("chunked", {"chunk_size": 3}),
                                       ("prefill_extend", {"extend_batch_size": 3})])
@pytest.mark.parametrize("semantics", SEMANTICS)
def test_bfloat16_close_to_float32(jax_tiny, jax_tiny_bf16, base, mode, opts, semantics):
    # probabilities ~0.5: 2e-2 means something
    want = scores(jax_tiny, base, apply_softmax=True, semantics=semantics)
    got = scores(jax_tiny_bf16, base, mode, apply_softmax=True, semantics=semantics, **opts)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-2)


@pytest.mark.slow
def test_long_prefix_uses_several_key_tiles(jax_tiny, make_request):
    """A prefix over 2048 tokens is cut into key tiles merged by the online softmax
    (2101 tokens -> 2560 padded -> 5 tiles of 512)."""
    from mibench.engines.jax_attention import key_block_size

    assert key_block_size(2560) == 512
    req = make_request(13, query_len=2100, num_items=3, item_len=(2, 6))
    for semantics in SEMANTICS:
        want = scores(jax_tiny, req, semantics=semantics)
        for mode, opts in [("packed", {"mask": "segment"}), ("prefill_extend", {})]:
            assert_close(scores(jax_tiny, req, mode, semantics=semantics, **opts), want,
                         1e-5, 1e-4)

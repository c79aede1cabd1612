"""Items never see each other: changing one item leaves every other item's scores bitwise
identical (same length) or within 1e-6 (changed length), in every mode and under both
semantics. A leaking mask (an item attending to another item's tokens) fails these tests."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DELIM, LABELS, SEMANTICS_TIERED, example_id, mode_examples, tiered

from mibench.engines.modes.layout import pack
from mibench.engines.request import make_request as build_request

ALL_MODES = mode_examples()  # every mode, every example the registry declares
IDS = [example_id(m, o) for m, o in ALL_MODES]
SEMANTICS = ("delimited", "plain")
CHANGED = 3  # the item we mutate; with chunk/batch 3 it shares a chunk with items 4 and 5


def run(engine, query, items, mode, opts, semantics=None):
    return np.asarray(engine.score(query, items, LABELS, mode=mode, delimiter=DELIM,
                                   semantics=semantics, **opts).scores)


@pytest.fixture(scope="module")
def base(make_request):
    return make_request(21, query_len=40, num_items=7, item_len=(2, 9))


def mutated(items, new_len=None, seed=0):
    rng = np.random.default_rng(seed)
    out = [list(i) for i in items]
    n = new_len or len(out[CHANGED])
    out[CHANGED] = rng.integers(0, 151000, n).tolist()
    return out


@pytest.mark.parametrize("semantics", SEMANTICS_TIERED)
@pytest.mark.parametrize("mode,opts", tiered(ALL_MODES))
def test_same_length_change_is_bitwise_invisible(jax_tiny, base, mode, opts, semantics):
    query, items = base
    before = run(jax_tiny, query, items, mode, opts, semantics)
    after = run(jax_tiny, query, mutated(items), mode, opts, semantics)
    others = [i for i in range(len(items)) if i != CHANGED]
    assert np.array_equal(before[others], after[others])
    assert not np.allclose(before[CHANGED], after[CHANGED], rtol=1e-3, atol=0)


@pytest.mark.slow
@pytest.mark.parametrize("semantics", SEMANTICS_TIERED)
@pytest.mark.parametrize("mode,opts", ALL_MODES, ids=IDS)
def test_length_change_moves_others_at_most_1e6(jax_tiny, base, mode, opts, semantics):
    query, items = base
    before = run(jax_tiny, query, items, mode, opts, semantics)
    after = run(jax_tiny, query, mutated(items, new_len=len(items[CHANGED]) + 3), mode, opts,
                semantics)
    others = [i for i in range(len(items)) if i != CHANGED]
    np.testing.assert_allclose(after[others], before[others], rtol=0, atol=1e-6)
    # the scores are ~1e-5, so also bound the relative change (float32 reordering noise)
    np.testing.assert_allclose(np.log(after[others]), np.log(before[others]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_dense_mask_lets_items_see_only_prefix_and_themselves(base, semantics):
    """The prefix is `query d` (delimited) or `query` (plain: the delimiter after the query
    leads the item region, and no item row sees it)."""
    query, items = base
    req = build_request(query, items, LABELS, delimiter=DELIM, vocab_size=151936,
                        max_length=4096, semantics=semantics)
    batch = pack(req, [list(range(len(items)))])
    mask = batch.dense_mask()[0]
    p, pp = len(req.prefix), batch.prefix_pad
    assert p == len(query) + (semantics == "delimited")
    at = 1 if semantics == "plain" else 0
    for item in items:
        rows = slice(pp + at, pp + at + len(item))
        visible = np.flatnonzero(mask[rows].any(0))
        own = np.arange(pp + at, pp + at + len(item))
        assert set(visible) == set(range(p)) | set(own)
        at += len(item) + 1
    assert not mask[:pp, pp:].any()  # the query never sees items


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_leak_detector_catches_a_leaking_mask(jax_tiny, base, monkeypatch, semantics):
    """Control: with item rows allowed to see every earlier token, isolation fails."""
    from mibench.engines.modes.layout import PackedBatch

    leaky = PackedBatch.dense_mask

    def leaking(self):
        mask = leaky(self)
        t = mask.shape[-1]
        return mask | np.tril(np.ones((t, t), bool))[None]

    monkeypatch.setattr(PackedBatch, "dense_mask", leaking)
    query, items = base
    before = run(jax_tiny, query, items, "packed", {"mask": "dense"}, semantics)
    after = run(jax_tiny, query, mutated(items), "packed", {"mask": "dense"}, semantics)
    assert not np.array_equal(before[CHANGED + 1:], after[CHANGED + 1:])

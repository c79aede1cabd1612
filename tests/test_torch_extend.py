"""The torch engine's `prefill_extend` against its own `single`, in float32."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import DELIM, LABELS, random_request

import mibench.engines.torch_engine as torch_engine
from mibench.engines import MibenchError, load_engine

# 7 ragged items in batches of 3: the last batch holds one item
REQUEST = random_request(11, query_len=40, num_items=7, item_len=(1, 9))


def _scores(engine, query, items, mode, **kw):
    return np.asarray(engine.score(query, items, LABELS, mode=mode, **kw).scores)


def _extend(engine, query, items, **kw):
    return _scores(engine, query, items, "prefill_extend", extend_batch_size=3, **kw)


def _assert_same(a, b, tol=1e-5):
    """Close on scores and on log scores (full-vocabulary scores are ~1e-5: only the log
    scores tell them apart)."""
    assert np.abs(a - b).max() <= tol
    assert np.abs(np.log(a) - np.log(b)).max() <= tol


@pytest.fixture(scope="module")
def torch_qwen2():
    return load_engine("torch", model="embedded:tiny-qwen2")


# (delimiter, semantics): delimited; plain without a delimiter; plain with one (unused)
SEMANTICS = [(DELIM, "delimited"), (None, "plain"), (DELIM, "plain")]


@pytest.mark.parametrize("apply_softmax", [False, True])
@pytest.mark.parametrize("delimiter,semantics", SEMANTICS,
                         ids=["delimited", "plain", "plain-with-delimiter"])
@pytest.mark.parametrize("engine_fixture", ["torch_tiny", "torch_qwen2"])
def test_extend_matches_single(request, engine_fixture, apply_softmax, delimiter, semantics):
    engine = request.getfixturevalue(engine_fixture)
    query, items = REQUEST
    kw = dict(apply_softmax=apply_softmax, delimiter=delimiter, semantics=semantics)
    single = _scores(engine, query, items, "single", **kw)
    extend = _extend(engine, query, items, **kw)
    assert extend.shape == (7, 2)
    _assert_same(extend, single)
    # the items get clearly different scores, or the match proves nothing
    logs = np.log(single[:, 0])
    assert logs.max() - logs.min() >= 0.3


def test_controls_isolation_and_positions(torch_tiny, monkeypatch):
    """Reversing the items (new neighbours, new batches) changes no item's score; a mask
    that lets items see each other, or positions shifted by one, changes them."""
    query, items = REQUEST
    base = _extend(torch_tiny, query, items, delimiter=DELIM)
    _assert_same(_extend(torch_tiny, query, items[::-1], delimiter=DELIM)[::-1], base)

    def leaky(items, prefix_len, device):  # plain causal mask over all the items
        ids, pos, mask, last = extend_inputs(items, prefix_len, device)
        return ids, pos, mask.new_ones(mask.shape).tril(prefix_len), last

    def shifted(items, prefix_len, device):  # every item one position too far
        ids, pos, mask, last = extend_inputs(items, prefix_len, device)
        return ids, pos + 1, mask, last

    extend_inputs = torch_engine.extend_inputs
    for wrong in (leaky, shifted):
        monkeypatch.setattr(torch_engine, "extend_inputs", wrong)
        bad = _extend(torch_tiny, query, items, delimiter=DELIM)
        assert np.abs(np.log(bad) - np.log(base)).max() > 1e-2


def test_num_tokens_counts_the_prefix_once(torch_tiny):
    query, items = REQUEST
    result = torch_tiny.score(query, items, LABELS, mode="prefill_extend", delimiter=DELIM)
    assert result.num_tokens == len(query) + 1 + sum(len(item) for item in items)
    plain = torch_tiny.score(query, items, LABELS, mode="prefill_extend", delimiter=DELIM,
                             semantics="plain")
    assert plain.num_tokens == len(query) + sum(len(item) for item in items)


@pytest.mark.slow
def test_plain_and_delimited_differ(torch_tiny):
    """Both modes score both semantics, and the two are far apart: plain reads each item
    right after the query (positions from Q), delimited after `query d` (from Q + 1)."""
    query, items = REQUEST
    for mode in ("single", "prefill_extend"):
        plain = _scores(torch_tiny, query, items, mode, delimiter=DELIM, semantics="plain")
        delimited = _scores(torch_tiny, query, items, mode, delimiter=DELIM,
                            semantics="delimited")
        assert np.abs(np.log(plain) - np.log(delimited)).max() > 1e-2
    with pytest.raises(MibenchError, match="semantics"):
        torch_tiny.score(query, items, LABELS, mode="prefill_extend", semantics="delimited")


@pytest.mark.parametrize("bad", [0, -2, 2.5, True, "8"])
def test_bad_extend_batch_size_names_the_field(torch_tiny, bad):
    query, items = REQUEST
    with pytest.raises(MibenchError, match="extend_batch_size"):
        torch_tiny.score(query, items, LABELS, mode="prefill_extend", extend_batch_size=bad)

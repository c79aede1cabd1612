"""Properties of the compiled programs: no T x T array in the segment program, the prefix
cache never copied per item in prefill_extend, no compilation on a repeated call; and
clear errors for options that make no sense."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DELIM, LABELS, SEMANTICS_TIERED, mode_examples

from mibench.engines.modes import extend as extend_mode
from mibench.engines.modes import packed as packed_mode
from mibench.engines.modes.compiles import count_compiles
from mibench.engines.modes.layout import PackedBatch, extend_batches, pack
from mibench.engines.request import make_request as build_request
from mibench.errors import MibenchError

SHAPE = re.compile(r"\b(?:f32|bf16|s32|pred|f16|u32|s8|u8)\[([0-9,]*)\]")


def hlo_shapes(compiled) -> list[tuple[int, ...]]:
    """Every array shape in a compiled program's optimised HLO."""
    return [tuple(int(d) for d in m.split(",") if d) for m in SHAPE.findall(compiled.as_text())]


def request(query, items, delimiter=DELIM, semantics=None):
    return build_request(query, items, LABELS, delimiter=delimiter, vocab_size=151936,
                         max_length=40960, semantics=semantics)


def segment_program(engine, batch: PackedBatch, req):
    rows = packed_mode.scored_row_indices(batch)
    return packed_mode.packed_segment_forward.lower(
        engine.params, batch.tokens_bt, batch.positions_bt, batch.seg_start_bi,
        batch.prefix_end_b, rows, jnp.asarray(req.labels), cfg=engine.model_config,
        apply_softmax=False, prefix_pad=batch.prefix_pad, band=batch.band,
        attn=engine.attention({"attention": "xla"})).compile()


@pytest.mark.slow
@pytest.mark.parametrize("semantics", ["delimited", "plain"])
def test_segment_program_has_no_t_by_t_array(jax_tiny, make_request, monkeypatch, semantics):
    query, items = make_request(31, query_len=30, num_items=120, item_len=(4, 9))
    req = request(query, items, semantics=semantics)
    batch = pack(req, [list(range(len(items)))])
    t = batch.tokens_bt.shape[1]
    region = t - batch.prefix_pad
    assert region >= 512
    big = [s for s in hlo_shapes(segment_program(jax_tiny, batch, req))
           if sum(d >= region for d in s) >= 2]
    assert not big, f"arrays with two dimensions >= {region} tokens: {big[:5]}"
    # the control: the dense program does hold [.., T, T] arrays
    mask = batch.dense_mask()
    dense = packed_mode.packed_dense_forward.lower(
        jax_tiny.params, batch.tokens_bt, batch.positions_bt, mask,
        packed_mode.scored_row_indices(batch), jnp.asarray(req.labels), cfg=jax_tiny.model_config,
        apply_softmax=False).compile()
    assert any(sum(d == t for d in s) >= 2 for s in hlo_shapes(dense))
    # and the host never builds the mask for the segment path
    monkeypatch.setattr(PackedBatch, "dense_mask", lambda self: pytest.fail("dense mask built"))
    jax_tiny.score(query, items[:5], LABELS, mode="packed", mask="segment", delimiter=DELIM,
                   semantics=semantics)


def copies_prefix(shapes, batch: int, prefix: int) -> list[tuple[int, ...]]:
    """Shapes holding a per-item prefix: both the batch and the prefix length as dims."""
    return [s for s in shapes if batch in s and prefix in s]


@pytest.mark.slow
def test_prefill_extend_never_copies_the_prefix_per_item(jax_tiny, make_request):
    b = 5  # distinct from every model dimension of `tiny`, as is the prefix length 512
    query, items = make_request(32, query_len=450, num_items=b, item_len=4)
    req = request(query, items)
    eb = extend_batches(req, b, [b])[0]
    cfg, attn = jax_tiny.model_config, jax_tiny.attention({"attention": "xla"})
    k_cache, v_cache = extend_mode.prefill(jax_tiny.params, np.zeros((1, 512), np.int32),
                                           np.int32(451), cfg=cfg, attn=attn)
    assert k_cache.shape[2] == 512
    compiled = extend_mode.extend.lower(jax_tiny.params, k_cache, v_cache, np.int32(451),
                                        eb.tokens_bl, eb.positions_bl, eb.last_b,
                                        cfg=cfg, attn=attn).compile()
    assert not copies_prefix(hlo_shapes(compiled), b, 512)

    # the control: a per-item copy of the prefix is caught by the same check
    @jax.jit
    def naive(q_blnh, k_1skh):
        k_bskh = jnp.broadcast_to(k_1skh, (b,) + k_1skh.shape[1:])
        return jnp.einsum("blnh,bsnh->blns", q_blnh, k_bskh[:, :, :1]).sum(-1)

    q = jnp.zeros((b, 4, 2, 64))
    assert copies_prefix(hlo_shapes(naive.lower(q, k_cache[0]).compile()), b, 512)


@pytest.mark.slow
def test_prefill_extend_dense_materialises_the_extend_mask(jax_tiny, make_request,
                                                          monkeypatch):
    """mask dense: the host builds [B, L, P + L] per batch and passes it in; the program
    holds every row's scores against [prefix | own tokens] (the dense baseline), the
    prefix KV still shared. The segment merge never builds the mask, and its program has
    no array as wide as P + L (the control: the same check finds the dense one's)."""
    b, p, length = 5, 512, 4
    query, items = make_request(35, query_len=450, num_items=b, item_len=length)
    req = request(query, items)
    eb = extend_batches(req, b, [b])[0]
    cfg, attn = jax_tiny.model_config, jax_tiny.attention({"attention": "xla"})
    k_cache, v_cache = extend_mode.prefill(jax_tiny.params, np.zeros((1, p), np.int32),
                                           np.int32(451), cfg=cfg, attn=attn)
    mask = eb.dense_mask(p, 451)
    assert mask.shape == (b, length, p + length) and mask.dtype == bool
    assert mask[:, :, :451].all() and not mask[:, :, 451:p].any()  # the prefix, no padding
    np.testing.assert_array_equal(mask[0, :, p:], np.tril(np.ones((length, length), bool)))
    dense = hlo_shapes(extend_mode.extend_dense.lower(
        jax_tiny.params, k_cache, v_cache, eb.tokens_bl, eb.positions_bl, eb.last_b, mask,
        cfg=cfg).compile())
    assert any(p + length in s and b in s for s in dense)  # [B, .., L, P + L] scores
    assert not [s for s in dense if s[:1] == (b,) and p in s and 64 in s]  # no KV copy
    segment = hlo_shapes(extend_mode.extend.lower(
        jax_tiny.params, k_cache, v_cache, np.int32(451), eb.tokens_bl, eb.positions_bl,
        eb.last_b, cfg=cfg, attn=attn).compile())
    assert not any(p + length in s for s in segment)
    # the host builds the mask for the dense mask only
    built = []
    monkeypatch.setattr(type(eb), "dense_mask", lambda self, *a: built.append(a) or mask)
    jax_tiny.score(query, items, LABELS, mode="prefill_extend", delimiter=DELIM,
                   extend_batch_size=b)
    assert built == []
    jax_tiny.score(query, items, LABELS, mode="prefill_extend", delimiter=DELIM,
                   extend_batch_size=b, mask="dense")
    assert built == [(p, 451)]


# every example the registry declares, and precompiled bucket sets (segment and dense)
CALLS = mode_examples() + [("prefill_extend", {"extend_batch_size": 2, "precompile_bs": [1, 2]}),
                           ("prefill_extend", {"extend_batch_size": 3, "precompile_bs": [2, 3]}),
                           ("prefill_extend", {"extend_batch_size": 3, "precompile_bs": [2, 3],
                                               "mask": "dense"})]


@pytest.mark.slow
@pytest.mark.parametrize("semantics", SEMANTICS_TIERED)
@pytest.mark.parametrize("mode,opts", CALLS, ids=[f"{m}{list(o.values())}" for m, o in CALLS])
def test_repeated_call_compiles_nothing(jax_tiny, make_request, mode, opts, semantics):
    query, items = make_request(33, query_len=20, num_items=5, item_len=(2, 7))
    kw = dict(mode=mode, delimiter=DELIM, semantics=semantics, **opts)
    first = jax_tiny.score(query, items, LABELS, **kw)
    with count_compiles() as compiles:
        again = jax_tiny.score(query, items, LABELS, **kw)
    assert compiles() == 0
    assert again.scores == first.scores


@pytest.mark.slow
def test_precompiled_batch_sizes_serve_other_item_counts(jax_tiny, make_request):
    query, items = make_request(34, query_len=20, num_items=7, item_len=5)
    opts = {"extend_batch_size": 3, "precompile_bs": [1, 2, 3]}
    jax_tiny.score(query, items[:3], LABELS, mode="prefill_extend", delimiter=DELIM, **opts)
    with count_compiles() as compiles:  # last batches of 2 and 1 items: precompiled sizes
        for n in (5, 7):
            jax_tiny.score(query, items[:n], LABELS, mode="prefill_extend", delimiter=DELIM,
                           **opts)
    assert compiles() == 0


def test_compile_counter_counts(jax_tiny):
    with count_compiles() as compiles:
        jax.jit(lambda x: x * 3 + 1)(np.arange(7))
    assert compiles() == 1


BAD = [
    ("packed", {"mask": "segment", "semantics": "plain"}, None, "delimiter"),
    ("chunked", {"chunk_size": 2, "semantics": "plain"}, None, "delimiter"),
    ("single", {"semantics": "delimited"}, None, "semantics"),
    ("prefill_extend", {"semantics": "delimited"}, None, "semantics"),
    ("packed", {"semantics": "quoted"}, DELIM, "semantics"),
    ("chunked", {"chunk_size": 0}, DELIM, "chunk_size"),
    ("chunked", {"chunk_size": 2.5}, DELIM, "chunk_size"),
    ("prefill_extend", {"extend_batch_size": 0}, DELIM, "extend_batch_size"),
    ("prefill_extend", {"extend_batch_size": 4, "precompile_bs": [1, 2]}, DELIM, "precompile_bs"),
    ("prefill_extend", {"extend_batch_size": 2, "precompile_bs": [0, 2]}, DELIM, "precompile_bs"),
    ("prefill_extend", {"chunk_size": 2}, DELIM, "chunk_size"),
    ("packed", {"mask": "segment"}, None, "delimiter"),
    ("chunked", {"chunk_size": 2}, None, "delimiter"),
    ("packed", {"mask": "sparse"}, DELIM, "mask"),
    ("chunked", {"chunk_size": 2, "mask": "flash"}, DELIM, "mask"),
    ("packed", {"extend_batch_size": 2}, DELIM, "extend_batch_size"),
    ("single", {"mask": "dense"}, DELIM, "mask"),
]


@pytest.mark.parametrize("mode,opts,delimiter,field", BAD,
                         ids=[f"{m}-{f}-{i}" for i, (m, _, _, f) in enumerate(BAD)])
def test_bad_options_are_clear_errors(jax_tiny, mode, opts, delimiter, field):
    with pytest.raises(MibenchError) as err:
        jax_tiny.score([1, 2, 3], [[4, 5]], LABELS, mode=mode, delimiter=delimiter, **opts)
    assert err.value.field == field
    assert field in str(err.value)


@pytest.mark.parametrize("v, r, block", [(1000, 7, 256), (1000, 7, 4096), (1024, 600, 256),
                                         (5, 3, 2)])
def test_vocab_logsumexp_matches_the_full_logits(v, r, block):
    """Tiled over the vocabulary without a padded copy of the head: a last block that
    overlaps the one before, one block wider than V, many row blocks."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from mibench.engines.jax_model import vocab_logsumexp

    rng = np.random.default_rng(v + r)
    h = jnp.asarray(rng.normal(size=(r, 16)), jnp.float32)
    w = jnp.asarray(rng.normal(size=(v, 16)), jnp.float32)
    got = np.asarray(vocab_logsumexp(h, w, block, row_block=256))
    want = np.asarray(jax.nn.logsumexp(h @ w.T, axis=-1, keepdims=True))
    assert got.shape == (r, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)

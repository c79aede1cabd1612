"""Mode `prefill_extend`: prefill the prefix (`query d` delimited, `query` plain) once,
then extend the items in batches against the shared prefix KV cache (item positions from
the prefix length on), then one LM-head pass over every scored row.

Masks of the extend rows (option `mask`): `segment` (the default) attends to the prefix
and to the item's own tokens apart and merges the two by their log-sum-exp, from O(1)
metadata (the prefix length); `dense` passes a host-built boolean mask [B, L, P + L] to
every extend call and materialises every row's scores against [prefix | own tokens] (the
seeds' dense baseline); `auto` is `segment` (no shape was measured where dense wins).

Compiled shapes: one prefill per bucketed prefix length, one extend per (batch size from
`precompile_bs`, bucketed item length), one LM head per bucketed item count. A repeated
identical call therefore compiles nothing; and when `precompile_bs` is given, the first
call at an item length compiles every listed batch size, so requests with another item
count compile nothing new either.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from ..jax_model import decoder, label_scores, prefix_masked_attention
from ..request import ScoreRequest
from ..sharding import to_host
from .layout import (
    ExtendBatch,
    bucket_length,
    extend_batches,
    prefix_tokens,
)
from .options import batch_sizes


@functools.partial(jax.jit, static_argnames=("cfg", "attn"))
def prefill(params, tokens_1p, prefix_len, *, cfg, attn):
    """KV cache of the (right-padded) prefix: k and v [L, 1, P, K, H]."""
    p = tokens_1p.shape[1]
    positions_1p = jnp.arange(p, dtype=jnp.int32)[None]
    key_len_1 = jnp.reshape(prefix_len, (1,))
    _, (k_l1pkh, v_l1pkh) = decoder(
        params, tokens_1p, positions_1p, cfg,
        lambda q, k, v, _: attn.causal(q, k, v, key_len_1), return_kv=True)
    return k_l1pkh, v_l1pkh


@functools.partial(jax.jit, static_argnames=("cfg", "attn"))
def extend(params, k_l1pkh, v_l1pkh, prefix_len, tokens_bl, positions_bl, last_b, *, cfg,
           attn):
    """Hidden states [B, D] of each item's last token, items [B, L] after the cached prefix."""
    def attend(q, k, v, cache):
        k_1pkh, v_1pkh = cache
        return attn.extend(q, k, v, k_1pkh, v_1pkh, prefix_len)

    h_bld = decoder(params, tokens_bl, positions_bl, cfg, attend, layer_extra=(k_l1pkh, v_l1pkh))
    return h_bld[jnp.arange(h_bld.shape[0]), last_b]


@functools.partial(jax.jit, static_argnames=("cfg",))
def extend_dense(params, k_l1pkh, v_l1pkh, tokens_bl, positions_bl, last_b, mask_bls, *, cfg):
    """`extend` with the host-built mask [B, L, P + L] (mask dense): plain masked attention
    of each item's rows against [cached prefix | own tokens], every score materialised."""
    def attend(q, k, v, cache):
        k_1pkh, v_1pkh = cache
        return prefix_masked_attention(q, k, v, k_1pkh, v_1pkh, mask_bls)

    h_bld = decoder(params, tokens_bl, positions_bl, cfg, attend, layer_extra=(k_l1pkh, v_l1pkh))
    return h_bld[jnp.arange(h_bld.shape[0]), last_b]


def run_extend(engine, attn, mask: str, k_cache, v_cache, prefix_len, eb: ExtendBatch):
    """Hidden states [B, D] of one batch's last tokens, by the mask implementation."""
    if mask == "dense":
        mask_bls = eb.dense_mask(k_cache.shape[2], int(prefix_len))
        return extend_dense(engine.params, k_cache, v_cache, eb.tokens_bl, eb.positions_bl,
                            eb.last_b, mask_bls, cfg=engine.cfg)
    return extend(engine.params, k_cache, v_cache, prefix_len, eb.tokens_bl, eb.positions_bl,
                  eb.last_b, cfg=engine.cfg, attn=attn)


def precompile(engine, attn, mask: str, k_cache, v_cache, length: int,
               sizes: list[int]) -> None:
    """Compile (by running on zeros) the extend of `mask` for every batch size at one item
    length."""
    for rows in sizes:
        key = ("extend", mask, attn.name, k_cache.shape, length, rows)
        if key not in engine.compiled:
            zeros = np.zeros((rows, length), np.int32)
            eb = ExtendBatch(zeros, zeros, np.zeros((rows,), np.int32), 0)
            run_extend(engine, attn, mask, k_cache, v_cache, np.int32(1), eb)
            engine.compiled.add(key)


@functools.partial(jax.jit, static_argnames=("apply_softmax",))
def score_rows(params, h_rd, labels, *, apply_softmax):
    """LM head of the scored rows only: [R, labels]."""
    return label_scores(params, h_rd, labels, apply_softmax)


def join_rows(hidden, batches) -> np.ndarray:
    """The real items' hidden states of every batch on the host, padded to a bucketed row
    count [R, D] (so the LM head compiles once per bucket, whatever the batch count)."""
    h_nd = np.concatenate([to_host(h)[:eb.count] for h, eb in zip(hidden, batches,
                                                                   strict=True)])
    n = h_nd.shape[0]
    return np.pad(h_nd, ((0, bucket_length(n) - n), (0, 0)))


def _extend_plan(engine, req: ScoreRequest, options: dict):
    """The prefix KV cache and the extend batches of one request, every batch size it pads
    to compiled: (attn, mask, cache k, cache v, prefix length, batches)."""
    attn = engine.attention(options)
    mask = "dense" if options["mask"] == "dense" else "segment"
    b, sizes = batch_sizes(options["extend_batch_size"], options["precompile_bs"])
    tokens_1p, prefix_len = prefix_tokens(req)
    k_cache, v_cache = prefill(engine.params, tokens_1p, prefix_len, cfg=engine.cfg, attn=attn)
    batches = extend_batches(req, b, sizes)
    if options["precompile_bs"] is not None:
        for length in sorted({eb.tokens_bl.shape[1] for eb in batches}):
            precompile(engine, attn, mask, k_cache, v_cache, length, sizes)
    return attn, mask, k_cache, v_cache, prefix_len, batches


def score_prefill_extend(engine, req: ScoreRequest, **options) -> np.ndarray:
    """Mode `prefill_extend`. Options: `extend_batch_size` (default EXTEND_BATCH_SIZE),
    `precompile_bs` (the batch sizes a short last batch may be padded to, all compiled on
    first use; default: powers of two below B and B, compiled when used), `mask` (segment,
    the default, dense or auto: the module doc) and `attention`."""
    attn, mask, k_cache, v_cache, prefix_len, batches = _extend_plan(engine, req, options)
    hidden = [run_extend(engine, attn, mask, k_cache, v_cache, prefix_len, eb)
              for eb in batches]
    out = score_rows(engine.params, join_rows(hidden, batches),
                     np.asarray(req.labels, np.int32), apply_softmax=req.apply_softmax)
    return to_host(out)[:len(req.items)]


def extend_batch_times(engine, req: ScoreRequest, **options) -> list[float]:
    """Wall seconds of each extend batch of one request, in order: each batch (its dense
    mask built on the host and copied, with mask dense) runs and is synced
    (`block_until_ready`) before the next starts, after the prefix is prefilled and synced.
    The sync points change what is timed (the timed runs overlap the batches), so the
    harness takes these in a pass of its own, outside the timed runs; a tail pause of one
    batch shows here as a number. The LM head is not run."""
    attn, mask, k_cache, v_cache, prefix_len, batches = _extend_plan(engine, req, options)
    jax.block_until_ready((k_cache, v_cache))
    times = []
    for eb in batches:
        start = time.perf_counter()
        jax.block_until_ready(run_extend(engine, attn, mask, k_cache, v_cache, prefix_len, eb))
        times.append(time.perf_counter() - start)
    return times

"""Attention kernels for the scoring modes: pure functions on arrays, no T x T array anywhere.

- `blocked_attention`: rows against a key range, tile by tile (rows in tiles, keys in
  tiles, online softmax in float32), so each tile's exponentials are consumed while the
  tile is still in cache. The G query heads of a kv head and all rows are stacked into one
  matrix of M = T*G rows per kv head: the keys are read once per tile of M rows. Masks come
  from O(T) metadata: a key length, and causality.
- `band_partial`: rows against a window of their own recent keys (an item's own tokens),
  masked by each row's segment start; the rest of the item region is never touched.
- `item_causal_partial`: items of a padded batch [B, L] attend causally to themselves.

A partial is the online-softmax state (m max [K, M], l sum [K, M], acc [K, M, H]) of some
keys; `blocked_attention` takes one as its initial state, so the item's own keys and the
prefix keys merge by their log-sum-exp inside one softmax, with no extra pass.
Shapes: B batch, T rows, S keys, K kv heads, G query heads per kv head, M = T*G stacked
rows, H head dim, W band window.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

F32 = jnp.float32
# finite: a masked score becomes an exact 0 after exp, never a NaN (a fully masked row of a
# plain softmax gives the mean of V)
NEG_INF = -1e30
TILE_FLOATS = 1 << 19  # scores per tile (2 MiB of float32): fits the 2 MiB L2 measured best


def key_block_size(s: int, causal: bool = False) -> int:
    """Keys per tile: all of them up to 2048 (512 when causal, so that tiles above the
    diagonal can be skipped), else the largest of 1024/512/... dividing S."""
    if s <= (512 if causal else 2048):
        return s
    cap = 512 if causal else 1024
    return next(b for b in (1024, 512, 256, 128, 64, 32, 16, 8, 4, 2, 1)
                if b <= cap and s % b == 0)


def row_block_size(t: int, heads: int, key_block: int) -> int:
    """Rows per tile: a power of two so that heads x rows x keys is about TILE_FLOATS."""
    rows = max(8, TILE_FLOATS // (heads * key_block))
    rows = 1 << (rows.bit_length() - 1)
    return min(rows, 1 << max(0, (t - 1).bit_length()))


def _online_step(q_kmh, k_ksh, v_ksh, bias_ms, carry):
    """One key tile of the online softmax: carry (m [K,M], l [K,M], acc [K,M,H]) or None."""
    s_kms = jnp.einsum("kmh,ksh->kms", q_kmh, k_ksh, preferred_element_type=F32) + bias_ms
    m_new = s_kms.max(-1)
    if carry is not None:
        m_new = jnp.maximum(carry[0], m_new)
    p_kms = jnp.exp(s_kms - m_new[..., None])
    l_km = p_kms.sum(-1)
    pv_kmh = jnp.einsum("kms,ksh->kmh", p_kms.astype(v_ksh.dtype), v_ksh,
                        preferred_element_type=F32)
    if carry is None:
        return m_new, l_km, pv_kmh
    m_km, l_old, acc_kmh = carry
    corr = jnp.exp(m_km - m_new)
    return m_new, l_old * corr + l_km, acc_kmh * corr[..., None] + pv_kmh


def _tile_bias(key_bias_s, j0, kb, row0, rows, groups, causal):
    """Additive mask of one tile [M or 1, kb]: key validity, and causality (row m is token
    (row0 + m) // groups) when asked."""
    bias = jax.lax.dynamic_slice_in_dim(key_bias_s, j0, kb)[None]
    if not causal:
        return bias
    tok_m = (row0 + jnp.arange(rows)) // groups
    return jnp.where(j0 + jnp.arange(kb)[None] <= tok_m[:, None], bias, NEG_INF)


def _attend_rows(q_kmh, row0, carry, k_ksh, v_ksh, key_bias_s, key_len, groups, causal):
    """One row tile against the key tiles it can see (online softmax) from an optional
    initial partial: o [K,M,H] float32 normalised, lse [K,M]. Tiles wholly past key_len,
    or above the diagonal when causal, are skipped (a loop with a data-dependent count)."""
    s = k_ksh.shape[1]
    kb = key_block_size(s, causal)
    rows = q_kmh.shape[1]

    def step(c, j0):
        bias = _tile_bias(key_bias_s, j0, kb, row0, rows, groups, causal)
        k_t = jax.lax.dynamic_slice_in_dim(k_ksh, j0, kb, axis=1)
        v_t = jax.lax.dynamic_slice_in_dim(v_ksh, j0, kb, axis=1)
        return _online_step(q_kmh, k_t, v_t, bias, c)

    carry = step(carry, 0)  # the first tile starts the state (or extends `init`)
    if s > kb:
        seen = (key_len + kb - 1) // kb
        if causal:
            seen = jnp.minimum(seen, (row0 + rows - 1) // groups // kb + 1)
        carry = jax.lax.fori_loop(1, jnp.minimum(seen, s // kb),
                                  lambda i, c: step(c, i * kb), carry)
    m_km, l_km, acc_kmh = carry
    return acc_kmh / l_km[..., None], m_km + jnp.log(l_km)


def _row_tiles(x_km, nr, rb):
    """[K, M, ...] -> [nr, K, rb, ...], padding M to nr * rb."""
    pad = [(0, 0), (0, nr * rb - x_km.shape[1])] + [(0, 0)] * (x_km.ndim - 2)
    x = jnp.pad(x_km, pad)
    return x.reshape(x.shape[0], nr, rb, *x.shape[2:]).swapaxes(0, 1)


def blocked_attention_1(q_tkgh, k_skh, v_skh, key_len, causal: bool, init=None):
    """One sequence: row t attends key j iff j < key_len (and j <= t when causal), plus
    whatever keys the initial partial `init` ([K, T*G] m and l, [K, T*G, H] acc) covers.
    Returns o [T, K, G, H] and lse [T, K, G]."""
    t, kh, g, h = q_tkgh.shape
    s = k_skh.shape[0]
    rb = row_block_size(t, kh * g, key_block_size(s, causal)) * g
    nr = -(-(t * g) // rb)
    q_kmh = (q_tkgh * (1.0 / math.sqrt(h))).astype(q_tkgh.dtype)
    q_kmh = q_kmh.transpose(1, 0, 2, 3).reshape(kh, t * g, h)
    k_ksh, v_ksh = k_skh.transpose(1, 0, 2), v_skh.transpose(1, 0, 2)
    key_bias_s = jnp.where(jnp.arange(s) < key_len, 0.0, NEG_INF).astype(F32)
    xs = (_row_tiles(q_kmh, nr, rb), jnp.arange(nr, dtype=jnp.int32) * rb,
          None if init is None else tuple(_row_tiles(x, nr, rb) for x in init))
    o_rkmh, lse_rkm = jax.lax.map(
        lambda x: _attend_rows(*x, k_ksh, v_ksh, key_bias_s, key_len, g, causal), xs)
    o_kmh = o_rkmh.swapaxes(0, 1).reshape(kh, nr * rb, h)[:, : t * g]
    o_tkgh = o_kmh.reshape(kh, t, g, h).transpose(1, 0, 2, 3).astype(q_tkgh.dtype)
    lse_km = lse_rkm.swapaxes(0, 1).reshape(kh, nr * rb)[:, : t * g]
    return o_tkgh, lse_km.reshape(kh, t, g).transpose(1, 0, 2)


def blocked_attention(q_btkgh, k_bskh, v_bskh, key_len_b, causal: bool = False, init=None):
    """Batched `blocked_attention_1`, one sequence after another (each has its own keys);
    `init` is None or a partial with a leading B axis."""
    if q_btkgh.shape[0] == 1:
        first = None if init is None else tuple(x[0] for x in init)
        o, lse = blocked_attention_1(q_btkgh[0], k_bskh[0], v_bskh[0], key_len_b[0], causal,
                                     first)
        return o[None], lse[None]
    return jax.lax.map(lambda xs: blocked_attention_1(*xs[:4], causal, xs[4]),
                       (q_btkgh, k_bskh, v_bskh, key_len_b, init))


def _softmax_partial(s_x, spec: str, v):
    """(m, l, acc) of masked scores s [..., keys] against v, per `spec` einsum."""
    m = s_x.max(-1)
    p = jnp.exp(s_x - m[..., None])
    acc = jnp.einsum(spec, p.astype(v.dtype), v, preferred_element_type=F32)
    return m, p.sum(-1), acc


def band_partial(q_btkgh, k_btkh, v_btkh, seg_start_bt, band: int):
    """Partial of row t over keys seg_start[t] <= j <= t, where t - seg_start[t] < band.
    Rows are cut in blocks of `band`; block i only reads keys [i*band - band, (i+1)*band):
    a window of 2*band keys instead of T. T must be a multiple of band.
    Returns m, l [B, K, T*G] and acc [B, K, T*G, H] (rows t-major, g-minor)."""
    b, t, kh, g, h = q_btkgh.shape
    nb, w = t // band, 2 * band
    key_nw = jnp.arange(nb)[:, None] * band + jnp.arange(w)[None] - band  # [nb, W], may be < 0
    gather_nw = jnp.maximum(key_nw, 0)
    k_bnwkh, v_bnwkh = k_btkh[:, gather_nw], v_btkh[:, gather_nw]  # [B, nb, W, K, H]
    q_bnrkgh = (q_btkgh * (1.0 / math.sqrt(h))).astype(q_btkgh.dtype).reshape(
        b, nb, band, kh, g, h)
    s_bknrgw = jnp.einsum("bnrkgh,bnwkh->bknrgw", q_bnrkgh, k_bnwkh, preferred_element_type=F32)
    row_nr = jnp.arange(t).reshape(nb, band)
    start_bnr = seg_start_bt.reshape(b, nb, band)
    ok_bnrw = ((key_nw[None, :, None, :] <= row_nr[None, :, :, None])
               & (key_nw[None, :, None, :] >= start_bnr[..., None]))
    s_bknrgw = jnp.where(ok_bnrw[:, None, :, :, None], s_bknrgw, NEG_INF)
    m, l, acc = _softmax_partial(s_bknrgw, "bknrgw,bnwkh->bknrgh", v_bnwkh)
    return m.reshape(b, kh, t * g), l.reshape(b, kh, t * g), acc.reshape(b, kh, t * g, h)


def item_causal_partial(q_blkgh, k_blkh, v_blkh):
    """Partial of each item of a padded batch [B, L] over its own tokens, causally; rows of
    all items stacked: m, l [K, B*L*G] and acc [K, B*L*G, H]."""
    b, l, kh, g, h = q_blkgh.shape
    q_blkgh = (q_blkgh * (1.0 / math.sqrt(h))).astype(q_blkgh.dtype)
    s_kbigj = jnp.einsum("bikgh,bjkh->kbigj", q_blkgh, k_blkh, preferred_element_type=F32)
    causal_ij = jnp.arange(l)[None, :] <= jnp.arange(l)[:, None]
    s_kbigj = jnp.where(causal_ij[:, None, :], s_kbigj, NEG_INF)
    m, den, acc = _softmax_partial(s_kbigj, "kbigj,bjkh->kbigh", v_blkh)
    rows = b * l * g
    return m.reshape(kh, rows), den.reshape(kh, rows), acc.reshape(kh, rows, h)


def split_heads(x_btnh, kv_heads: int):
    """[B, T, N, H] -> [B, T, K, G, H]."""
    b, t, n, h = x_btnh.shape
    return x_btnh.reshape(b, t, kv_heads, n // kv_heads, h)


def causal_blocked(q_btnh, k_bskh, v_bskh, key_len_b):
    """Causal attention of a right-padded sequence, tile by tile: row t sees j <= t, j < len."""
    o, _ = blocked_attention(split_heads(q_btnh, k_bskh.shape[2]), k_bskh, v_bskh,
                             key_len_b, causal=True)
    return o.reshape(q_btnh.shape)


def segment_attention(q_btnh, k_btkh, v_btkh, prefix_end_b, seg_start_bt, *,
                      prefix_pad: int, band: int):
    """Packed layout [prefix padded to prefix_pad | item region]: prefix rows are causal;
    item rows see their own segment (a band) and keys j < prefix_end (a tiled pass over
    the prefix keys that starts from the band's partial). Metadata is O(T): prefix_end [B]
    and the item region's segment starts [B, T - prefix_pad], within the item region."""
    q_btkgh = split_heads(q_btnh, k_btkh.shape[2])
    kp_bskh, vp_bskh = k_btkh[:, :prefix_pad], v_btkh[:, :prefix_pad]
    o_pre, _ = blocked_attention(q_btkgh[:, :prefix_pad], kp_bskh, vp_bskh, prefix_end_b,
                                 causal=True)
    q_items = q_btkgh[:, prefix_pad:]
    band_state = band_partial(q_items, k_btkh[:, prefix_pad:], v_btkh[:, prefix_pad:],
                              seg_start_bt, band)
    o_items, _ = blocked_attention(q_items, kp_bskh, vp_bskh, prefix_end_b, init=band_state)
    return jnp.concatenate([o_pre, o_items], axis=1).reshape(q_btnh.shape)


def extend_attention(q_blnh, k_blkh, v_blkh, k_prefix_1skh, v_prefix_1skh, prefix_len):
    """Items [B, L] against a shared prefix cache [1, S, K, H] (keys j < prefix_len) and
    causally against themselves. The prefix is read once for all B*L*G rows: the rows are
    stacked into one sequence, never the prefix copied per item."""
    b, l, n, h = q_blnh.shape
    q_blkgh = split_heads(q_blnh, k_blkh.shape[2])
    own = tuple(x[None] for x in item_causal_partial(q_blkgh, k_blkh, v_blkh))
    q_1rkgh = q_blkgh.reshape(1, b * l, *q_blkgh.shape[2:])
    o, _ = blocked_attention(q_1rkgh, k_prefix_1skh, v_prefix_1skh,
                             jnp.reshape(prefix_len, (1,)), init=own)
    return o.reshape(b, l, n, h)

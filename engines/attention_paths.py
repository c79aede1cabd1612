"""Attention paths by backend: `attention: auto | xla | pallas | cudnn` (a mode option).

Every mode needs three kernels: `causal` (prefill, single, the packed prefix rows),
`segment` (packed item rows: their own segment plus the prefix) and `extend` (items
against the shared prefix cache).
- `xla`: the tiled kernels of `jax_attention` (tiles sized for a CPU's cache).
- `cudnn`: cuDNN flash attention (GPU, bfloat16/float16).
- `pallas`: the Pallas TPU splash-attention kernel that JAX ships (TPU; on a CPU it runs in
  Pallas interpret mode, which is how the tests check it). At tp > 1 it runs per chip on
  the chip's own heads (`shard_map` over the mesh, `sharded`): XLA cannot partition a
  Pallas kernel itself (the TPU compiler refuses: "Mosaic kernels cannot be automatically
  partitioned").
`cudnn` and `pallas` share one primitive, `keys(q, k, v, key_len, causal) -> (o, lse)`:
flash attention of rows against keys j < key_len (and j <= t when causal) with the
log-sum-exp of each row. The item rows' own tokens (a band of at most one item) are a
small XLA partial from `jax_attention`, merged with the prefix part by log-sum-exp.
Shapes: B batch, T rows, S keys, N query heads, K kv heads, G = N / K, H head dim.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import jax
import jax.numpy as jnp

from mibench.errors import MibenchError

from . import jax_attention as xa
from .sharding import ACT_BTN, ACT_BTNH, REPLICATED

F32 = xa.F32
# keys(q [B,T,N,H], k [B,S,K,H], v [B,S,K,H], key_len [B], causal) -> o [B,T,N,H], lse [B,T,N]
KeysFn = Callable[..., tuple[jax.Array, jax.Array]]


@dataclasses.dataclass(frozen=True)
class Paths:
    """The three kernels of one attention path (signatures as in `jax_attention`)."""

    name: str
    causal: Callable
    segment: Callable
    extend: Callable


def resolve(choice: str, platform: str, dtype: str, tp: int = 1) -> str:
    """The path that runs: `auto` is cudnn on GPU in 16-bit, pallas on TPU (any tp: split
    by heads over the mesh, `sharded`), else xla. An explicit path the backend cannot run
    is a MibenchError naming `attention`."""
    if choice == "auto":
        if platform == "gpu" and dtype != "float32":
            return "cudnn"
        return "pallas" if platform == "tpu" else "xla"
    if choice == "cudnn" and (platform != "gpu" or dtype == "float32"):
        raise MibenchError(f"cudnn flash attention needs a CUDA GPU and bfloat16 (here: "
                           f"{platform}, {dtype})", field="attention")
    if choice == "pallas" and platform == "gpu":
        raise MibenchError("the pallas path is the TPU splash kernel (interpret mode on "
                           f"CPU); here: {platform}", field="attention")
    return choice


def _heads_major(partial, b: int, t: int, n: int, h: int):
    """A (m, l, acc) partial with rows t-major, g-minor ([B,K,T*G] / [B,K,T*G,H]) as
    o [B,T,N,H] float32 and lse [B,T,N]."""
    m, l, acc = partial
    kh = m.shape[1]
    o = (acc / l[..., None]).reshape(b, kh, t, n // kh, h).transpose(0, 2, 1, 3, 4)
    lse = (m + jnp.log(l)).reshape(b, kh, t, n // kh).transpose(0, 2, 1, 3)
    return o.reshape(b, t, n, h), lse.reshape(b, t, n)


def merge(o1, lse1, o2, lse2):
    """Softmax over the union of two disjoint key sets from each one's (o, lse)."""
    lse = jnp.logaddexp(lse1, lse2)
    w1, w2 = jnp.exp(lse1 - lse)[..., None], jnp.exp(lse2 - lse)[..., None]
    return o1.astype(F32) * w1 + o2.astype(F32) * w2


def composed(name: str, keys: KeysFn) -> Paths:
    """The three kernels built from a `keys` primitive and the small own-token partials."""

    def causal(q_btnh, k_bskh, v_bskh, key_len_b):
        return keys(q_btnh, k_bskh, v_bskh, key_len_b, True)[0].astype(q_btnh.dtype)

    def segment(q_btnh, k_btkh, v_btkh, prefix_end_b, seg_start_bt, *, prefix_pad, band):
        p = prefix_pad
        kp_bskh, vp_bskh = k_btkh[:, :p], v_btkh[:, :p]
        o_pre = causal(q_btnh[:, :p], kp_bskh, vp_bskh, prefix_end_b)
        q_items = q_btnh[:, p:]
        o_x, lse_x = keys(q_items, kp_bskh, vp_bskh, prefix_end_b, False)
        b, t, n, h = q_items.shape
        own = xa.band_partial(xa.split_heads(q_items, k_btkh.shape[2]), k_btkh[:, p:],
                              v_btkh[:, p:], seg_start_bt, band)
        o_items = merge(o_x, lse_x, *_heads_major(own, b, t, n, h))
        return jnp.concatenate([o_pre, o_items.astype(q_btnh.dtype)], axis=1)

    def extend(q_blnh, k_blkh, v_blkh, k_prefix_1skh, v_prefix_1skh, prefix_len):
        b, l, n, h = q_blnh.shape
        o_x, lse_x = keys(q_blnh.reshape(1, b * l, n, h), k_prefix_1skh, v_prefix_1skh,
                          jnp.reshape(prefix_len, (1,)), False)
        m, den, acc = xa.item_causal_partial(xa.split_heads(q_blnh, k_blkh.shape[2]),
                                             k_blkh, v_blkh)
        own = _heads_major((m[None], den[None], acc[None]), 1, b * l, n, h)
        return merge(o_x, lse_x, *own).reshape(b, l, n, h).astype(q_blnh.dtype)

    return Paths(name, causal, segment, extend)


def keys_cudnn(q_btnh, k_bskh, v_bskh, key_len_b, causal: bool):
    """cuDNN flash attention with its softmax statistics (float32 log-sum-exp). JAX's
    public `jax.nn.dot_product_attention` casts them to the input dtype, which is too coarse
    for a merge in bfloat16, so this calls the cuDNN wrapper it is built on."""
    from jax._src.cudnn.fused_attention_stablehlo import MaskType, dot_product_attention

    b, t, _, h = q_btnh.shape
    mask = MaskType.PADDING_CAUSAL if causal else MaskType.PADDING
    o, lse_bnt = dot_product_attention(
        q_btnh, k_bskh, v_bskh, bias=None, mask=None, q_seqlen=jnp.full((b,), t, jnp.int32),
        kv_seqlen=key_len_b.astype(jnp.int32), scale=1.0 / math.sqrt(h), mask_type=mask,
        return_residual=True)
    return o, lse_bnt.transpose(0, 2, 1).astype(F32)


def _splash_block(n: int) -> int:
    """Splash tile for a padded length n (a multiple of 128): the largest of 512/256/128
    dividing n (512 feeds the v6e's 256-wide MXU two tiles at a time)."""
    return next(b for b in (512, 256, 128) if n % b == 0)


def keys_splash(q_btnh, k_bskh, v_bskh, key_len_b, causal: bool, interpret: bool = False):
    """The Pallas TPU splash kernel, one MQA kernel per kv head (GQA), keys past key_len
    in another segment; lengths padded to multiples of 128."""
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as sk,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as sm,
    )

    b, t, n, h = q_btnh.shape
    s, kh = k_bskh.shape[1:3]
    g = n // kh
    tp, sp = -(-t // 128) * 128, -(-s // 128) * 128
    shape = (tp, sp)
    head_mask = sm.CausalMask(shape) if causal else sm.FullMask(shape)
    blocks = sk.BlockSizes(block_q=_splash_block(tp), block_kv=_splash_block(sp))
    kernel = sk.make_splash_mqa_single_device(
        sm.MultiHeadMask([head_mask] * g), block_sizes=blocks, save_residuals=True,
        interpret=interpret)
    q = jnp.pad(q_btnh * (1.0 / math.sqrt(h)), ((0, 0), (0, tp - t), (0, 0), (0, 0)))
    q_bkgth = q.astype(q_btnh.dtype).reshape(b, tp, kh, g, h).transpose(0, 2, 3, 1, 4)
    pad_k = ((0, 0), (0, sp - s), (0, 0), (0, 0))
    k_bksh = jnp.pad(k_bskh, pad_k).transpose(0, 2, 1, 3)
    v_bksh = jnp.pad(v_bskh, pad_k).transpose(0, 2, 1, 3)
    kv_ids_bs = (jnp.arange(sp)[None] >= key_len_b[:, None]).astype(jnp.int32)

    def one(q_gth, k_sh, v_sh, kv_ids_s):
        ids = sk.SegmentIds(q=jnp.zeros((tp,), jnp.int32), kv=kv_ids_s)
        return kernel(q_gth, k_sh, v_sh, segment_ids=ids)

    per_head = jax.vmap(one, in_axes=(0, 0, 0, None))
    o_bkgth, (lse_bkgt,) = jax.vmap(per_head)(q_bkgth, k_bksh, v_bksh, kv_ids_bs)
    o = o_bkgth.transpose(0, 3, 1, 2, 4).reshape(b, tp, n, h)[:, :t]
    lse = lse_bkgt.transpose(0, 3, 1, 2).reshape(b, tp, n)[:, :t]
    return o, lse.astype(F32)


def heads_split(mesh, q_heads: int, kv_heads: int) -> bool:
    """Whether a `keys` call splits its heads over the mesh: both head counts divisible by
    its size (each chip then holds whole GQA groups: query heads [i N/tp, (i+1) N/tp) read
    kv heads [i K/tp, (i+1) K/tp)). Otherwise the heads stay whole on every chip, as their
    projection weights do (sharding.py), and each chip runs every head."""
    return mesh.size > 1 and q_heads % mesh.size == 0 and kv_heads % mesh.size == 0


def sharded(keys: KeysFn, mesh) -> KeysFn:
    """`keys` per chip (shard_map over the mesh): q, k, v split by head (ACT_BTNH), the
    key lengths replicated, each chip's kernel on its local N/tp query heads and K/tp kv
    heads; o by head, lse [B, T, N] by head (ACT_BTN). No mesh (tp 1): `keys` itself."""
    if mesh is None or mesh.size == 1:
        return keys

    def keys_per_chip(q_btnh, k_bskh, v_bskh, key_len_b, causal: bool):
        split = heads_split(mesh, q_btnh.shape[2], k_bskh.shape[2])
        heads, lse = (ACT_BTNH, ACT_BTN) if split else (REPLICATED, REPLICATED)
        run = jax.shard_map(lambda q, k, v, n: keys(q, k, v, n, causal), mesh=mesh,
                            in_specs=(heads, heads, heads, REPLICATED),
                            out_specs=(heads, lse), check_vma=False)
        return run(q_btnh, k_bskh, v_bskh, key_len_b)

    return keys_per_chip


XLA = Paths("xla", xa.causal_blocked, xa.segment_attention, xa.extend_attention)


@functools.cache
def paths(name: str, platform: str, mesh=None) -> Paths:
    """The kernels of a resolved path name (see `resolve`) on a platform; `mesh`: the
    engine's (sharding.ShardConfig.mesh), over which the pallas kernel is split by head."""
    if name == "xla":
        return XLA
    if name == "cudnn":
        return composed("cudnn", keys_cudnn)
    if name == "pallas":
        interpret = platform != "tpu"
        keys = functools.partial(keys_splash, interpret=interpret)
        return composed("pallas", sharded(keys, mesh))
    raise MibenchError(f"unknown attention path {name!r}", field="attention")

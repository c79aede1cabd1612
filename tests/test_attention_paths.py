"""Every attention path against a brute-force masked attention, per mask kind: causal with
a key length (prefill, single), packed segments (the layout's own dense mask), prefix plus
own tokens (extend). Paths: `xla` (the tiled kernels), `pallas` (the TPU splash kernel in
Pallas interpret mode) and the composition that `cudnn` uses, with JAX's XLA attention
standing in for cuDNN (same call, same (o, lse) contract), since CI has no GPU."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import DELIM

from mibench.engines import attention_paths as ap
from mibench.engines.modes.layout import pack
from mibench.engines.request import make_request
from mibench.errors import MibenchError

N, K, H = 4, 2, 32  # 4 query heads on 2 kv heads (GQA)


def xla_keys(q, k, v, key_len, causal):
    """jax.nn's XLA attention with its log-sum-exp: the stand-in for cuDNN."""
    o, lse = jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                          key_value_seq_lengths=key_len, implementation="xla",
                                          return_residual=True)
    return o, lse.astype(jnp.float32)


PATHS = {"xla": ap.XLA, "pallas": ap.paths("pallas", "cpu"),
         "composed": ap.composed("composed", xla_keys)}
# every path; Pallas in interpret mode is slow on a CPU (the fast tier leaves it out)
PATH_PARAMS = [pytest.param(n, marks=pytest.mark.slow) if n == "pallas" else n for n in PATHS]


def jitted(name: str, kind: str):
    """A path's attention under jit, as the engine's compiled programs call it (eagerly, op
    by op, the tiled loops took about 3x as long on a CPU)."""
    static = ("prefix_pad", "band") if kind == "segment" else ()
    return jax.jit(getattr(PATHS[name], kind), static_argnames=static)


def brute(q_btnh, k_bskh, v_bskh, mask_bts):
    """softmax(q k / sqrt(H) masked) v in float64 numpy, GQA by repeating kv heads."""
    q, k, v = (np.asarray(x, np.float64) for x in (q_btnh, k_bskh, v_bskh))
    g = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, g, axis=2), np.repeat(v, g, axis=2)
    s = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    s = np.where(np.asarray(mask_bts)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bnts,bsnh->btnh", p / p.sum(-1, keepdims=True), v)


def normal(rng, *shape):
    return jnp.asarray(rng.normal(size=shape), jnp.float32)


@pytest.mark.parametrize("name", PATH_PARAMS)
def test_causal_with_key_length(name):
    rng = np.random.default_rng(0)
    t, key_len = 150, np.array([97, 150], np.int32)
    q, k, v = normal(rng, 2, t, N, H), normal(rng, 2, t, K, H), normal(rng, 2, t, K, H)
    got = np.asarray(jitted(name, "causal")(q, k, v, jnp.asarray(key_len)))
    i, j = np.arange(t)[:, None], np.arange(t)[None]
    mask = (j <= i)[None] & (j[None] < key_len[:, None, None])
    want = brute(q, k, v, mask)
    for b, n in enumerate(key_len):  # rows past the key length are padding
        np.testing.assert_allclose(got[b, :n], want[b, :n], atol=2e-5, rtol=0)


def packed_inputs(seed: int):
    rng = np.random.default_rng(seed)
    query = rng.integers(0, 1000, 37).tolist()
    items = [rng.integers(0, 1000, int(n)).tolist() for n in rng.integers(1, 9, 11)]
    req = make_request(query, items, [1], delimiter=DELIM, vocab_size=151936, max_length=4096)
    batch = pack(req, [list(range(0, 6)), list(range(6, 11))])  # two chunks of a batch
    b, t = batch.tokens_bt.shape
    return batch, normal(rng, b, t, N, H), normal(rng, b, t, K, H), normal(rng, b, t, K, H)


@pytest.mark.parametrize("name", PATH_PARAMS)
def test_packed_segments_match_the_dense_mask(name):
    batch, q, k, v = packed_inputs(1)
    got = jitted(name, "segment")(q, k, v, jnp.asarray(batch.prefix_end_b),
                                  jnp.asarray(batch.seg_start_bi), prefix_pad=batch.prefix_pad,
                                  band=batch.band)
    mask = batch.dense_mask()
    np.testing.assert_allclose(np.asarray(got), brute(q, k, v, mask), atol=2e-5, rtol=0)
    # the control: the same rows under a mask that lets items see each other differ
    leaky = mask | (np.arange(mask.shape[1])[None, None] <= np.arange(mask.shape[1])[None, :,
                                                                                      None])
    assert np.abs(np.asarray(got) - brute(q, k, v, leaky)).max() > 1e-2


@pytest.mark.parametrize("name", PATH_PARAMS)
def test_extend_sees_the_prefix_and_its_own_tokens(name):
    rng = np.random.default_rng(2)
    b, l, s, prefix_len = 3, 6, 64, 41
    q, k, v = normal(rng, b, l, N, H), normal(rng, b, l, K, H), normal(rng, b, l, K, H)
    kp, vp = normal(rng, 1, s, K, H), normal(rng, 1, s, K, H)
    got = np.asarray(jitted(name, "extend")(q, k, v, kp, vp, jnp.int32(prefix_len)))
    # each item as one sequence: [prefix | own tokens], prefix keys past prefix_len masked
    keys = jnp.concatenate([jnp.broadcast_to(kp, (b, s, K, H)), k], axis=1)
    vals = jnp.concatenate([jnp.broadcast_to(vp, (b, s, K, H)), v], axis=1)
    j, i = np.arange(s + l)[None], np.arange(l)[:, None]
    mask = (j < prefix_len) | ((j >= s) & (j - s <= i))
    np.testing.assert_allclose(got, brute(q, keys, vals, np.broadcast_to(mask, (b, l, s + l))),
                               atol=2e-5, rtol=0)
    no_own = np.broadcast_to(j < prefix_len, (b, l, s + l))  # the control: own tokens matter
    assert np.abs(got - brute(q, keys, vals, no_own)).max() > 1e-2


@pytest.mark.parametrize("choice,platform,dtype,tp,want", [
    ("auto", "cpu", "float32", 1, "xla"), ("auto", "gpu", "bfloat16", 1, "cudnn"),
    ("auto", "gpu", "float32", 1, "xla"), ("auto", "tpu", "bfloat16", 1, "pallas"),
    ("auto", "tpu", "bfloat16", 4, "pallas"), ("auto", "tpu", "bfloat16", 8, "pallas"),
    ("auto", "cpu", "float32", 8, "xla"), ("pallas", "cpu", "float32", 1, "pallas"),
    ("pallas", "tpu", "bfloat16", 2, "pallas"), ("pallas", "cpu", "float32", 8, "pallas"),
    ("xla", "gpu", "bfloat16", 1, "xla")])
def test_auto_picks_the_path_per_backend(choice, platform, dtype, tp, want):
    assert ap.resolve(choice, platform, dtype, tp) == want


@pytest.mark.parametrize("choice,platform,dtype,tp", [
    ("cudnn", "cpu", "bfloat16", 1), ("cudnn", "gpu", "float32", 1),
    ("pallas", "gpu", "bfloat16", 1)])
def test_a_path_the_backend_cannot_run_is_an_error(choice, platform, dtype, tp):
    with pytest.raises(MibenchError) as e:
        ap.resolve(choice, platform, dtype, tp)
    assert e.value.field == "attention"

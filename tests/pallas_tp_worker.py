"""Runs in a subprocess for tests/test_pallas_tp.py (JAX must see its devices from the start).

    python tests/pallas_tp_worker.py kernels TP            the three pallas kernels at tp TP
    python tests/pallas_tp_worker.py modes PRESET TP       every mode example at tp TP, pallas
    python tests/pallas_tp_worker.py tpu TARGET            compile keys for a TPU slice

`kernels` and `modes` run on simulated CPU devices (Pallas interpret mode); `tpu` on the
compile-only devices of libtpu (nothing runs). Each prints one JSON object as its last line.
"""

from __future__ import annotations

import functools
import json
import math
import sys

import numpy as np
from conftest import DELIM, LABELS, example_id, mode_examples, random_request

SEMANTICS = ("delimited", "plain")


def brute(q_btnh, k_bskh, v_bskh, mask_bts, kv_of_head=None):
    """softmax(q k / sqrt(H) masked) v in float64; query head n reads kv head
    kv_of_head[n] (default n // G, GQA)."""
    q, k, v = (np.asarray(x, np.float64) for x in (q_btnh, k_bskh, v_bskh))
    n, kh = q.shape[2], k.shape[2]
    heads = np.arange(n) // (n // kh) if kv_of_head is None else kv_of_head
    k, v = k[:, :, heads], v[:, :, heads]
    s = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    s = np.where(np.asarray(mask_bts)[:, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return np.einsum("bnts,bsnh->btnh", p / p.sum(-1, keepdims=True), v)


def _kernel_cases(rng, n: int, kh: int, sharding):
    """(name, call(paths) -> (kernel, arguments, static keywords), mask, q, k, v, rows) for
    causal, segment and extend; the [B, T, heads, H] inputs placed with `sharding` (by head,
    as the engine's are)."""
    import jax
    import jax.numpy as jnp

    from mibench.engines.modes.layout import pack
    from mibench.engines.request import make_request

    h = 32

    def normal(*shape):
        x = jnp.asarray(rng.normal(size=shape), jnp.float32)
        return jax.device_put(x, sharding) if len(shape) == 4 else x
    t, key_len = 150, np.array([97, 150], np.int32)
    q, k, v = normal(2, t, n, h), normal(2, t, kh, h), normal(2, t, kh, h)
    i, j = np.arange(t)[:, None], np.arange(t)[None]
    causal = ("causal", lambda p: (p.causal, (q, k, v, jnp.asarray(key_len)), {}),
              (j <= i)[None] & (j[None] < key_len[:, None, None]), q, k, v, key_len)
    query = rng.integers(0, 1000, 37).tolist()
    items = [rng.integers(0, 1000, int(m)).tolist() for m in rng.integers(1, 9, 11)]
    req = make_request(query, items, [1], delimiter=DELIM, vocab_size=151936, max_length=4096)
    batch = pack(req, [list(range(0, 6)), list(range(6, 11))])
    b, t = batch.tokens_bt.shape
    qs, ks, vs = normal(b, t, n, h), normal(b, t, kh, h), normal(b, t, kh, h)
    segment = ("segment", lambda p: (p.segment, (
        qs, ks, vs, jnp.asarray(batch.prefix_end_b), jnp.asarray(batch.seg_start_bi)),
        {"prefix_pad": batch.prefix_pad, "band": batch.band}), batch.dense_mask(), qs, ks, vs,
        np.full(b, t))
    b, l, s, prefix_len = 3, 6, 64, 41
    qe, ke, ve = normal(b, l, n, h), normal(b, l, kh, h), normal(b, l, kh, h)
    kp, vp = normal(1, s, kh, h), normal(1, s, kh, h)
    keys = jnp.concatenate([jnp.broadcast_to(kp, (b, s, kh, h)), ke], axis=1)
    vals = jnp.concatenate([jnp.broadcast_to(vp, (b, s, kh, h)), ve], axis=1)
    j, i = np.arange(s + l)[None], np.arange(l)[:, None]
    mask = np.broadcast_to((j < prefix_len) | ((j >= s) & (j - s <= i)), (b, l, s + l))
    extend = ("extend", lambda p: (p.extend, (qe, ke, ve, kp, vp, jnp.int32(prefix_len)), {}),
              mask, qe, keys, vals, np.full(b, l))
    return [causal, segment, extend]


def kernels(tp: int) -> dict:
    """The pallas kernels on a tp mesh, for two head layouts: 16 query heads on 8 kv heads
    (split by head: 16/tp and 8/tp per chip), and 4 on 2 (at tp 8 not divisible: every
    chip runs every head). Inputs are placed by head as the engine's are. Per kernel: the
    largest difference from brute force, from brute force with a wrong head mapping (the
    control), the output's sharding spec, and whether the kernel runs in a shard_map
    (interpret mode gives right values without one, which the TPU compiler refuses)."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from mibench.engines import attention_paths as ap
    from mibench.engines.sharding import ACT_BTNH

    mesh = Mesh(np.array(jax.devices()[:tp]), ("tp",))
    paths = ap.paths("pallas", "cpu", mesh)
    out = {}
    for n, kh in ((16, 8), (4, 2)):
        rng = np.random.default_rng(n)
        split = ap.heads_split(mesh, n, kh)
        sharding = NamedSharding(mesh, ACT_BTNH if split else PartitionSpec())
        for name, call, mask, q, k, v, rows in _kernel_cases(rng, n, kh, sharding):
            kernel, args, static = call(paths)
            # under jit, as the engine's programs call it (op by op took about 3x as long)
            got = jax.jit(kernel, static_argnames=tuple(static))(*args, **static)
            o = np.asarray(got)
            want = brute(q, k, v, mask)
            wrong = brute(q, k, v, mask, kv_of_head=np.arange(n) % kh)  # not n // G
            keep = np.arange(o.shape[1])[None] < np.asarray(rows)[:, None]  # padding rows
            text = str(jax.make_jaxpr(functools.partial(kernel, **static))(*args))
            out[f"{name}/{n}x{kh}"] = {
                "diff": float(np.abs(o - want)[keep].max()),
                "control": float(np.abs(o - wrong)[keep].max()),
                "spec": str(getattr(got.sharding, "spec", None)),
                "shard_map": "shard_map" in text, "split": split}
    return out


def modes(preset: str, tp: int) -> dict:
    """Log scores of every mode example the registry declares, both semantics, scored by
    the engine at tp `tp` with attention pallas, and by the engine at tp 1 (xla, the
    reference: the same mode and serial `single`)."""
    from mibench.engines import load_engine

    query, items = random_request(11, query_len=40, num_items=7, item_len=(1, 9))
    ref = load_engine("jax", model=f"embedded:{preset}", tp=1)
    eng = load_engine("jax", model=f"embedded:{preset}", tp=tp)

    def score(engine, mode, semantics, **opts):
        out = engine.score(query, items, LABELS, mode=mode, delimiter=DELIM,
                           semantics=semantics, **opts)
        return np.log(np.asarray(out.scores)).tolist()

    result = {"tp": eng.topology["tp"], "kv_heads": eng.cfg.num_kv_heads,
              "heads": eng.cfg.num_heads, "path": eng.attention({"attention": "pallas"}).name,
              "single": {s: score(ref, "single", s) for s in SEMANTICS}, "modes": {}}
    for mode, opts in mode_examples():
        result["modes"][example_id(mode, opts)] = {
            s: {"tp": score(eng, mode, s, **opts, attention="pallas"),
                "tp1": score(ref, mode, s, **opts)} for s in SEMANTICS}
    return result


def tpu(target: str) -> dict:
    """The `keys` primitive (causal and not) compiled by libtpu for a slice's chips with
    heads split over them: through `attention_paths.sharded`, and bare (the control: XLA
    cannot partition a Pallas kernel). Status `ok` or the compiler's first line."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    from mibench.engines import attention_paths as ap
    from mibench.engines.sharding import ACT_BTNH
    from mibench.engines.tpu import target_devices

    devices = target_devices(target)
    mesh = Mesh(np.array(devices), ("tp",))
    heads, rep = NamedSharding(mesh, ACT_BTNH), NamedSharding(mesh, PartitionSpec())
    tp = len(devices)
    q = jax.ShapeDtypeStruct((1, 256, 2 * tp, 128), jnp.bfloat16, sharding=heads)
    kv = jax.ShapeDtypeStruct((1, 256, tp, 128), jnp.bfloat16, sharding=heads)
    key_len = jax.ShapeDtypeStruct((1,), jnp.int32, sharding=rep)
    out = {}
    for name, keys in (("sharded", ap.sharded(ap.keys_splash, mesh)), ("bare", ap.keys_splash)):
        for causal in (True, False):
            try:
                jax.jit(lambda q, k, v, n, keys=keys, c=causal: keys(q, k, v, n, c)).lower(
                    q, kv, kv, key_len).compile()
                status = "ok"
            except Exception as e:  # the compiler's refusal is the finding
                status = str(e).strip().splitlines()[0]
            out[f"{name}/{'causal' if causal else 'full'}"] = status
    return out


def main(argv: list[str]) -> None:
    if argv[0] == "kernels":
        result = kernels(int(argv[1]))
    elif argv[0] == "modes":
        result = modes(argv[1], int(argv[2]))
    else:
        result = tpu(argv[1])
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])

"""Where the time of `prefill_extend` goes: each stage timed on its own (device synced),
so a GPU or TPU run shows which program to work on next without a trace viewer."""

from __future__ import annotations

import statistics
import time

import jax
import numpy as np

from .modes.extend import (
    extend,
    join_rows,
    prefill,
    score_rows,
)
from .modes.layout import extend_batches, prefix_tokens
from .modes.options import batch_sizes
from .modes.registry import MODES


def _ms(fn, repeats: int) -> tuple[float, object]:
    """Median wall time (ms) of `fn()` with its outputs ready, and the last output."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), out


def prefill_extend_stages(engine, query, items, labels, *, delimiter=None,
                          apply_softmax=False, semantics=None, repeats: int = 5,
                          **options) -> dict:
    """Median ms of the prefill, of all extend batches, of the LM head, and of the whole
    `score` call (host work included), after one untimed call of each (compilation)."""
    req = engine.request(query, items, labels, apply_softmax, delimiter, semantics)
    attn = engine.attention(options)
    options = MODES["jax"]["prefill_extend"].check(options)
    MODES["jax"]["prefill_extend"].check_semantics(req.semantics, req.delimiter)
    b, sizes = batch_sizes(options["extend_batch_size"], options["precompile_bs"])
    cfg, params = engine.cfg, engine.params
    tokens_1p, plen = prefix_tokens(req)
    run_prefill = lambda: prefill(params, tokens_1p, plen, cfg=cfg, attn=attn)  # noqa: E731
    _ms(run_prefill, 1)
    prefill_ms, (k, v) = _ms(run_prefill, repeats)
    batches = extend_batches(req, b, sizes)
    run_extend = lambda: [extend(params, k, v, plen, eb.tokens_bl, eb.positions_bl,  # noqa: E731
                                 eb.last_b, cfg=cfg, attn=attn) for eb in batches]
    _ms(run_extend, 1)
    extend_ms, hidden = _ms(run_extend, repeats)
    h_rd, labels_np = join_rows(hidden, batches), np.asarray(req.labels, np.int32)
    run_head = lambda: score_rows(params, h_rd, labels_np,  # noqa: E731
                                  apply_softmax=apply_softmax)
    _ms(run_head, 1)
    head_ms, _ = _ms(run_head, repeats)
    host_ms, _ = _ms(lambda: extend_batches(
        engine.request(query, items, labels, apply_softmax, delimiter, semantics), b, sizes),
        repeats)
    whole_ms, _ = _ms(lambda: engine.score(query, items, labels, mode="prefill_extend",
                                           delimiter=delimiter, apply_softmax=apply_softmax,
                                           semantics=semantics, **options), repeats)
    return {"attention": attn.name, "score_ms": whole_ms, "host_layout_ms": host_ms,
            "extend_batch_size": b, "extend_calls": len(batches),
            "prefill_ms": prefill_ms, "extend_ms": extend_ms, "lm_head_ms": head_ms,
            "items": len(req.items)}


def top_kernels(fn, folder, top: int = 15) -> list[dict]:
    """Trace `fn()` once with the JAX profiler (a Perfetto trace) and sum the time of each
    op or kernel by name: the device's kernels where there is a device (GPU/TPU), else the
    host's XLA work (Python frames left out). [{name, total_ms, calls}], largest first."""
    import collections
    import gzip
    import json
    from pathlib import Path

    with jax.profiler.trace(str(folder), create_perfetto_trace=True):
        jax.block_until_ready(fn())
    path = max(Path(folder).rglob("perfetto_trace.json.gz"), key=lambda p: p.stat().st_mtime)
    data = json.loads(gzip.open(path).read())
    events = data["traceEvents"] if isinstance(data, dict) else data
    procs = {e["pid"]: e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = {pid for pid, name in procs.items() if name.startswith("/device:")}
    total, calls = collections.Counter(), collections.Counter()
    for e in events:
        if e.get("ph") != "X" or (device and e["pid"] not in device):
            continue
        if not device and (e["name"].startswith("$") or "Pjit" in e["name"]):
            continue
        total[e["name"]] += e.get("dur", 0) / 1e3
        calls[e["name"]] += 1
    return [{"name": n, "total_ms": round(ms, 3), "calls": calls[n]}
            for n, ms in total.most_common(top)]


def cudnn_check() -> dict:
    """cuDNN keys attention (o and lse) against jax.nn's XLA attention, bfloat16, causal
    and not: the largest differences."""
    import jax.numpy as jnp

    from .attention_paths import keys_cudnn

    out = {}
    kq, kk, kv = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(kq, (1, 256, 16, 128), jnp.bfloat16)
    k = jax.random.normal(kk, (1, 256, 8, 128), jnp.bfloat16)
    v = jax.random.normal(kv, (1, 256, 8, 128), jnp.bfloat16)
    key_len = jnp.array([200], jnp.int32)
    for causal in (True, False):
        o, lse = keys_cudnn(q, k, v, key_len, causal)
        o_ref, lse_ref = jax.nn.dot_product_attention(
            q.astype(jnp.float32), k.astype(jnp.float32), v.astype(jnp.float32),
            is_causal=causal, key_value_seq_lengths=key_len, implementation="xla",
            return_residual=True)
        out[f"causal={causal}"] = {
            "o_max_diff": float(jnp.abs(o.astype(jnp.float32) - o_ref)[:, :200].max()),
            "lse_max_diff": float(jnp.abs(lse - lse_ref)[:, :200].max())}
    return out

"""Per-case metrics from run times, the workload and the model shape."""

from __future__ import annotations

import hashlib
import json

from mibench.workloads import Request, total_items, total_tokens

from ..stats.describe import per_unit_ms, rates
from .run import Metrics
from .summaries import summarize


def useful_flops(cfg, requests: list[Request], delimiter: int | None, num_labels: int,
                 apply_softmax: bool) -> float:
    """Minimal work of one run: what any correct engine must compute, whatever its mode.

    Per request, with prefix P = query (+ 1 delimiter token) and items of lengths L_i:

    - linear layers, once per distinct token: 2 * N_tok * layers * (d*(q + 2*kv) + q*d + 3*d*ff)
      with N_tok = P + sum(L_i) (the query is computed once, not once per item);
    - attention, QK^T and PV: 4 * layers * q * sum over tokens of the keys it attends to:
      P*(P+1)/2 for the causal prefix, and sum_i sum_{j=1..L_i} (P + j) for items, each
      token seeing the prefix and its own item's earlier tokens and itself;
    - the LM head for the scored rows only (one per item): 2 * d * V per row, or
      2 * d * num_labels when apply_softmax (only the label logits are needed).

    d = hidden, q = heads x head_dim, kv = kv_heads x head_dim, ff = MLP width,
    V = vocabulary. Norms, RoPE, softmax and embedding lookups are not counted.
    """
    d, layers = cfg.hidden_size, cfg.num_layers
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    linear_per_token = 2 * layers * (d * (q + 2 * kv) + q * d + 3 * d * cfg.intermediate_size)
    head_cols = num_labels if apply_softmax else cfg.vocab_size
    total = 0.0
    for r in requests:
        p = len(r.query) + (0 if delimiter is None else 1)
        lengths = [len(i) for i in r.items]
        n_tok = p + sum(lengths)
        keys = p * (p + 1) / 2 + sum(n * p + n * (n + 1) / 2 for n in lengths)
        total += linear_per_token * n_tok + 4 * layers * q * keys
        total += 2 * d * head_cols * len(lengths)
    return float(total)


def score_digest(scores: list[list[list[float]]], digits: int = 6) -> str:
    """sha256 of every score rounded to `digits` significant digits (format `.{digits-1}e`),
    request by request, item by item: equal digests mean the same scores to that precision."""
    text = json.dumps([[[f"{s:.{digits - 1}e}" for s in row] for row in req] for req in scores])
    return hashlib.sha256(text.encode()).hexdigest()


def case_metrics(timed_s: list[float], requests: list[Request], delimiter: int | None,
                 flops: float | None, peak_flops: float | None) -> Metrics:
    """Throughput, latency per item and total time summaries; tokens/s; mfu."""
    n_items = total_items(requests)
    total = summarize(timed_s)
    m = Metrics(throughput_items_per_s=summarize(rates(timed_s, n_items)),
                latency_per_item_ms=summarize(per_unit_ms(timed_s, n_items)), total_s=total,
                useful_flops=flops, peak_flops=peak_flops)
    if total is not None and total.median > 0:
        m.tokens_per_s = total_tokens(requests, delimiter) / total.median
        if flops is not None and peak_flops:
            m.mfu = flops / (total.median * peak_flops)
    return m

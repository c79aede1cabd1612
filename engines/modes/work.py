"""What one pass of a mode must compute and move, as pure arithmetic (no jax): mibench's
own formulas for the roofline bound (`mibench compile`), over the shapes the mode runs
(the same padding as modes/layout.py, restated in modes/accounting.py and tested to agree).

XLA's cost analysis counts a scanned layer once (engines/compile.py, COST_LOOPS), so the
bound does not use it: these formulas count every layer. Per pass, all chips together:

- FLOPs: every padded token row through the linear layers, 2 x the layer parameters
  (`2 * L * (d*(q + 2kv) + q*d + 3*d*ff)`); attention, 4 * L * q per (row, key) pair the
  mode computes (causal: the triangle; a dense mask: every pair of its T x T or
  [B, L, P + L]; segment: the prefix and the item's own band); the LM head, 2 * d * V per
  scored row, their count padded to its bucket as the engine pads it (2 * d * labels with
  apply_softmax).
- HBM bytes, a lower bound: every weight read once per call of a program that runs the
  layers (and the vocabulary matrix once per LM-head call); the prefix KV cache read once
  per extend call; each row's residual stream written and read once per layer; with a
  dense mask, the mask read once and the float32 scores of every head written and read
  once per layer (the dense path materialises them); norms, RoPE and softmax not counted.

Shapes: d hidden, L layers, q = heads x head_dim, kv = kv_heads x head_dim, ff MLP width,
V vocabulary, P the padded prefix, T a padded packed sequence, Lb a padded item, B a batch.
"""

from __future__ import annotations

import dataclasses
import math

from .accounting import (
    Shape,
    _longest,
    bucket_length,
    item_bucket,
    packed_tokens,
)

SCORE_BYTES = 4  # the dense path's scores are float32


@dataclasses.dataclass(frozen=True)
class Work:
    """One pass: FLOPs and HBM bytes (all chips), and the host->device bytes of the masks a
    mode builds on the host (the dense mask, copied every pass)."""

    flops: float
    hbm_bytes: float
    mask_bytes: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.flops + other.flops, self.hbm_bytes + other.hbm_bytes,
                    self.mask_bytes + other.mask_bytes)


def _dims(shape: Shape) -> tuple:
    m = shape.model
    q, kv = m.num_heads * m.head_dim, m.num_kv_heads * m.head_dim
    layer_params = m.hidden_size * (q + 2 * kv) + q * m.hidden_size + 3 * m.hidden_size * (
        m.intermediate_size)
    width = 4 if shape.dtype == "float32" else 2
    return m, q, kv, layer_params, width


def forward(shape: Shape, rows: float, pairs: float, calls: int = 1,
            dense_cells: float = 0.0) -> Work:
    """`calls` programs running the layers over `rows` token rows in all, attending over
    `pairs` (row, key) pairs; `dense_cells` mask cells (bool, from the host) whose float32
    scores every head materialises."""
    m, q, _, layer_params, width = _dims(shape)
    flops = 2 * m.num_layers * layer_params * rows + 4 * m.num_layers * q * pairs
    hbm = (calls * m.num_layers * layer_params * width  # weights, once per call
           + 2 * rows * m.num_layers * m.hidden_size * width  # residual, per layer
           + dense_cells  # the mask, read once
           + 2 * m.num_layers * m.num_heads * dense_cells * SCORE_BYTES)  # scores
    return Work(flops, hbm, dense_cells)


def head(shape: Shape, rows: float, calls: int = 1) -> Work:
    """The LM head of `rows` scored rows over `calls` programs."""
    m, _, _, _, width = _dims(shape)
    cols = shape.head_cols or m.vocab_size
    return Work(2 * m.hidden_size * cols * rows, calls * cols * m.hidden_size * width)


def causal_pairs(n: float) -> float:
    return n * (n + 1) / 2


def work_single(shape: Shape, options: dict) -> Work:
    """`single`: each item its own sequence `prefix + item`, padded, one call per item
    (the layers and the head of its last row)."""
    t = bucket_length(shape.prefix_len + _longest(shape))
    n = shape.num_items
    return forward(shape, n * t, n * causal_pairs(t), calls=n) + head(shape, n, calls=n)


def _packed(shape: Shape, batch: int, items: int, dense: bool, calls: int) -> Work:
    """`batch` packed sequences of `items` items in `calls` programs."""
    t, prefix, band = packed_tokens(shape, items)
    if dense:
        return forward(shape, batch * t, batch * t * t, calls, dense_cells=batch * t * t)
    pairs = causal_pairs(prefix) + (t - prefix) * (prefix + 2 * band)
    return forward(shape, batch * t, batch * pairs, calls)


def _dense(options: dict, shape: Shape, items: int, dense_max_t: int) -> bool:
    mask = options.get("mask", "auto")
    return mask == "dense" or (mask == "auto" and packed_tokens(shape, items)[0] <= dense_max_t)


def work_packed(shape: Shape, options: dict, dense_max_t: int) -> Work:
    """`packed`: one sequence of every item; dense (a T x T mask) or segment."""
    n = shape.num_items
    return (_packed(shape, 1, n, _dense(options, shape, n, dense_max_t), 1)
            + head(shape, bucket_length(n)))


def work_chunked(shape: Shape, options: dict, dense_max_t: int) -> Work:
    """`chunked`: ceil(N / chunk_size) packed sequences, one call (parallel) or one each
    (sequential), each chunk its own LM head when sequential."""
    per = min(options.get("chunk_size") or 1, max(shape.num_items, 1))
    chunks = math.ceil(shape.num_items / per)
    dense = _dense(options, shape, per, dense_max_t)
    if options.get("schedule", "parallel") == "parallel":
        return (_packed(shape, chunks, per, dense, 1)
                + head(shape, bucket_length(shape.num_items)))
    return (_packed(shape, chunks, per, dense, chunks)
            + head(shape, chunks * bucket_length(per), chunks))


def extend_batches(n: int, b: int, sizes: list[int]) -> list[int]:
    """The padded size of each extend batch of `n` items (modes/layout.py extend_batches:
    full batches of `b`, the last padded to the smallest size that holds it)."""
    full, rest = divmod(n, b)
    return [b] * full + ([min(s for s in sizes if s >= rest)] if rest else [])


def work_extend(shape: Shape, options: dict, batch_sizes) -> Work:
    """`prefill_extend`: the prefix prefilled once; each extend batch its own call, reading
    the prefix KV cache; one LM head over the bucketed item count. `batch_sizes`: the
    registry's (extend_batch_size, precompile_bs) -> (B, padded sizes)."""
    m, _, kv, _, width = _dims(shape)
    b, sizes = batch_sizes(options.get("extend_batch_size") or 1, options.get("precompile_bs"))
    p = bucket_length(shape.prefix_len)
    lb = item_bucket(max(_longest(shape), 1))
    out = forward(shape, p, causal_pairs(p))
    dense = options.get("mask") == "dense"
    cache = 2 * m.num_layers * p * kv * width
    for size in extend_batches(shape.num_items, b, sizes):
        rows = size * lb
        if dense:
            out += forward(shape, rows, rows * (p + lb), dense_cells=rows * (p + lb))
        else:
            out += forward(shape, rows, size * (lb * shape.prefix_len + causal_pairs(lb)))
        out += Work(0.0, cache)
    return out + head(shape, bucket_length(shape.num_items))


def work_none(shape: Shape, options: dict) -> None:
    """No formula (a server's work is its own)."""
    return None

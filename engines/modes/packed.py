"""Modes `packed` (dense or segment mask) and `chunked` (packed chunks as one batch).

Both run one jitted forward over the packed layout of `layout.pack` and read the scores of
each item's last row; only those rows go through the LM head.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from ..attention_paths import Paths
from ..jax_model import decoder, label_scores, masked_attention
from ..request import ScoreRequest
from ..sharding import to_host
from .layout import PackedBatch, bucket_length, pack, packed_length
from .registry import AUTO_DENSE_MAX_T

# mask="auto" picks dense only for padded sequences this short, where a [T, T] mask is tiny
# and the two cost the same. Measured on the 2-core CPU, tiny, float32 (dense vs segment):
# T=196 90 vs 98 ms, T=388 108 vs 105, T=776 167 vs 132, T=1796 492 vs 217,
# T=2564 1006 vs 319, T=12.8k 43 s vs 2.4 s. Segment wins from a few hundred tokens on.


def _scored_rows(h_btd, last_rows_r):
    """Hidden states of the scored rows [R, D] from the flat row indices."""
    b, t, d = h_btd.shape
    return h_btd.reshape(b * t, d)[last_rows_r]


@functools.partial(jax.jit, static_argnames=("cfg", "apply_softmax", "prefix_pad", "band",
                                             "attn"))
def packed_segment_forward(params, tokens_bt, positions_bt, seg_start_bi, prefix_end_b,
                           last_rows_r, labels, *, cfg, apply_softmax, prefix_pad, band,
                           attn: Paths):
    """Segment-mask forward of B packed sequences: scores [R, labels]."""
    def attend(q, k, v, _):
        return attn.segment(q, k, v, prefix_end_b, seg_start_bi,
                            prefix_pad=prefix_pad, band=band)

    h_btd = decoder(params, tokens_bt, positions_bt, cfg, attend)
    return label_scores(params, _scored_rows(h_btd, last_rows_r), labels, apply_softmax)


@functools.partial(jax.jit, static_argnames=("cfg", "apply_softmax"))
def packed_dense_forward(params, tokens_bt, positions_bt, mask_btt, last_rows_r, labels, *,
                         cfg, apply_softmax):
    """Dense-mask forward: the host-built [B, T, T] mask is an input of every call."""
    h_btd = decoder(params, tokens_bt, positions_bt, cfg,
                    lambda q, k, v, _: masked_attention(q, k, v, mask_btt))
    return label_scores(params, _scored_rows(h_btd, last_rows_r), labels, apply_softmax)


def scored_row_indices(batch: PackedBatch) -> np.ndarray:
    """Flat indices of the scored rows, padded (with row 0) to a bucketed count [R]."""
    last = batch.last_row_r
    return np.pad(last, (0, bucket_length(len(last)) - len(last)))


def run_packed(engine, req: ScoreRequest, batch: PackedBatch, mask: str,
               attn: Paths) -> np.ndarray:
    """Scores [N, labels] of a packed batch with the given mask implementation; the dense
    mask runs the plain masked attention whatever the path (the seeds' baseline)."""
    labels = np.asarray(req.labels, np.int32)
    rows = scored_row_indices(batch)
    common = dict(cfg=engine.cfg, apply_softmax=req.apply_softmax)
    if mask == "dense":
        out = packed_dense_forward(engine.params, batch.tokens_bt, batch.positions_bt,
                                   batch.dense_mask(), rows, labels, **common)
    else:
        out = packed_segment_forward(engine.params, batch.tokens_bt, batch.positions_bt,
                                     batch.seg_start_bi, batch.prefix_end_b, rows, labels,
                                     prefix_pad=batch.prefix_pad, band=batch.band, attn=attn,
                                     **common)
    return to_host(out)[: len(batch.last_row_r)]


def resolve_mask(mask: str, batch: PackedBatch) -> str:
    """`auto`: dense for padded sequences of at most AUTO_DENSE_MAX_T tokens, else segment."""
    if mask != "auto":
        return mask
    return "dense" if batch.tokens_bt.shape[1] <= AUTO_DENSE_MAX_T else "segment"


def score_packed(engine, req: ScoreRequest, **options) -> np.ndarray:
    """Mode `packed`: `query d item1 d ... itemN d` as one sequence, under either semantics
    (plain: items see the query only, their positions continue from it; `layout.pack`).
    Options `mask` (dense, segment or auto, the default) and `attention`."""
    mask, attn = options["mask"], engine.attention(options)
    batch = pack(req, [list(range(len(req.items)))])
    return run_packed(engine, req, batch, resolve_mask(mask, batch), attn)


def score_chunked(engine, req: ScoreRequest, **options) -> np.ndarray:
    """Mode `chunked`: ceil(N / chunk_size) packed sequences, each with its own copy of the
    query. Options `chunk_size` (default 32), `mask` (default segment; dense and
    auto as in `packed`), `schedule`: `parallel` (default; every chunk in one padded batch,
    the seeds' 141 items/s path) or `sequential` (one chunk after another, every chunk
    padded to the longest one's shape, so one program serves them
    all), and `attention`."""
    k, mask, schedule = options["chunk_size"], options["mask"], options["schedule"]
    attn = engine.attention(options)
    n = len(req.items)
    chunks = [list(range(lo, min(n, lo + k))) for lo in range(0, n, k)]
    if schedule == "parallel":
        batch = pack(req, chunks)
        return run_packed(engine, req, batch, resolve_mask(mask, batch), attn)
    shape = packed_length(req, chunks)  # the longest chunk's padded length
    outs = [run_packed(engine, req, batch, resolve_mask(mask, batch), attn)
            for batch in (pack(req, [c], pad_to=shape) for c in chunks)]
    return np.concatenate(outs)

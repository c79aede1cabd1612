"""Host-side layouts of the scoring modes: token ids, RoPE positions and O(T) mask metadata.

Packed layout of one sequence, delimited semantics (prefix `query d`, P = Q + 1):

    [query d | pad to prefix_pad | item1 d item2 d ... itemN d | pad to item_pad]

and plain semantics (prefix `query`, P = Q; the delimiter after the query leads the item
region):

    [query | pad to prefix_pad | d item1 d item2 d ... itemN d | pad to item_pad]

Either way the tokens are `query d item1 d ... itemN d` and the prefix (what every item
sees) is padded to a bucketed length so the split between prefix rows and item rows is
static. Item k's tokens sit at RoPE positions P, P+1, ..., those of its standalone sequence
(`query d item_k`, or `query item_k`). The delimiters in the item region and the padding
are never attended to by an item; each is its own one-token segment.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..request import ScoreRequest
from .accounting import bucket_length, item_bucket  # the padding rules (one place)


@dataclasses.dataclass(frozen=True)
class PackedBatch:
    """B packed sequences. Arrays are numpy; the ints are static shape parameters."""

    tokens_bt: np.ndarray      # [B, prefix_pad + item_pad] int32
    positions_bt: np.ndarray   # [B, T] int32
    seg_start_bi: np.ndarray   # [B, item_pad] int32, index within the item region
    prefix_end_b: np.ndarray   # [B] int32, valid prefix length
    last_row_r: np.ndarray     # [R] int32, flat index b * T + t of each item's last token
    prefix_pad: int
    band: int                  # >= every item's length, a multiple of 4

    def dense_mask(self) -> np.ndarray:
        """The materialised boolean mask [B, T, T] (True = may attend): the dense baseline."""
        b, t = self.tokens_bt.shape
        p = self.prefix_pad
        start_bt = np.concatenate([np.zeros((b, p), np.int64), p + self.seg_start_bi], 1)
        j = np.arange(t)[None, None, :]
        i = np.arange(t)[None, :, None]
        in_prefix = (j < self.prefix_end_b[:, None, None]) & (
            (i >= p) | (j <= i))  # prefix rows are causal, item rows see the whole prefix
        own = (j >= start_bt[:, :, None]) & (j <= i) & (i >= p)
        return in_prefix | own


def item_band(req: ScoreRequest) -> int:
    """The band of a packed layout: the longest item's padded length."""
    return item_bucket(max(len(it) for it in req.items))


def leading_separator(req: ScoreRequest) -> int:
    """1 under plain semantics, where the delimiter after the query leads the item region
    (it is not part of the prefix, which every item sees), else 0."""
    return 1 if req.semantics == "plain" else 0


def packed_length(req: ScoreRequest, chunks: list[list[int]], band: int | None = None) -> int:
    """Padded tokens of the packed sequences of `chunks` (the longest chunk decides):
    the bucketed prefix, then the item region rounded up to a multiple of the band."""
    band = band or item_band(req)
    region = leading_separator(req) + max(sum(len(req.items[i]) + 1 for i in c)
                                          for c in chunks)
    return bucket_length(len(req.prefix)) + -(-bucket_length(region) // band) * band


def pack(req: ScoreRequest, chunks: list[list[int]], band: int | None = None,
         pad_to: int = 0) -> PackedBatch:
    """Lay out each chunk of item indices as one packed sequence; all share one shape, at
    least `pad_to` tokens long (a `packed_length` of the same request)."""
    prefix = np.asarray(req.prefix, np.int32)
    p = len(prefix)
    prefix_pad = bucket_length(p)
    band = band or item_band(req)
    item_pad = max(packed_length(req, chunks, band), pad_to) - prefix_pad
    b, t = len(chunks), prefix_pad + item_pad
    tokens = np.zeros((b, t), np.int32)
    positions = np.zeros((b, t), np.int32)
    seg_start = np.broadcast_to(np.arange(item_pad, dtype=np.int32), (b, item_pad)).copy()
    tokens[:, :p] = prefix
    positions[:, :p] = np.arange(p)
    lead = leading_separator(req)
    if lead:  # plain: `query d` then the items, which see the query only and start at Q
        tokens[:, prefix_pad] = req.delimiter
        positions[:, prefix_pad] = p
    last = []
    for c, chunk in enumerate(chunks):
        at = lead
        for i in chunk:
            item = req.items[i]
            n = len(item)
            sl = slice(prefix_pad + at, prefix_pad + at + n)
            tokens[c, sl] = item
            positions[c, sl] = p + np.arange(n)
            seg_start[c, at:at + n] = at
            tokens[c, prefix_pad + at + n] = req.delimiter
            positions[c, prefix_pad + at + n] = p + n
            last.append(c * t + prefix_pad + at + n - 1)
            at += n + 1
    return PackedBatch(tokens, positions, seg_start, np.full((b,), p, np.int32),
                       np.asarray(last, np.int32), prefix_pad, band)


def prefix_tokens(req: ScoreRequest) -> tuple[np.ndarray, np.int32]:
    """The prefix (`query [d]`) right-padded to a bucketed length [1, P], and its length."""
    prefix = np.asarray(req.prefix, np.int32)
    tokens_1p = np.zeros((1, bucket_length(len(prefix))), np.int32)
    tokens_1p[0, : len(prefix)] = prefix
    return tokens_1p, np.int32(len(prefix))


@dataclasses.dataclass(frozen=True)
class ExtendBatch:
    """One batch of items for prefill_extend, right-padded to [B, L]."""

    tokens_bl: np.ndarray      # [B, L] int32
    positions_bl: np.ndarray   # [B, L] int32
    last_b: np.ndarray         # [B] int32, index of each item's last token
    count: int                 # real items; rows past it are padding

    def dense_mask(self, prefix_pad: int, prefix_len: int) -> np.ndarray:
        """The materialised boolean mask [B, L, P + L] of the dense extend (True = may
        attend; P = prefix_pad, the cache's length): row i of item b sees the prefix keys
        j < prefix_len and its own tokens j <= i within the item (padding rows: token 0)."""
        b, l = self.tokens_bl.shape
        i, j = np.arange(l)[:, None], np.arange(l)[None]
        own_bll = (j <= i)[None] & (j[None] < (self.last_b + 1)[:, None, None])
        prefix_blp = np.broadcast_to(np.arange(prefix_pad) < prefix_len, (b, l, prefix_pad))
        return np.concatenate([prefix_blp, own_bll], axis=2)


def extend_batches(req: ScoreRequest, batch: int, sizes: list[int]) -> list[ExtendBatch]:
    """Items in order, `batch` at a time; the last batch padded to the smallest size in
    `sizes` that holds it. Item lengths are padded to the batch's bucketed maximum."""
    p = len(req.prefix)
    out = []
    for lo in range(0, len(req.items), batch):
        items = req.items[lo:lo + batch]
        rows = min(s for s in sizes if s >= len(items))
        length = item_bucket(max(map(len, items)))
        tokens = np.zeros((rows, length), np.int32)
        positions = np.broadcast_to(p + np.arange(length, dtype=np.int32), (rows, length))
        last = np.zeros((rows,), np.int32)
        for r, item in enumerate(items):
            tokens[r, :len(item)] = item
            last[r] = len(item) - 1
        out.append(ExtendBatch(tokens, positions.copy(), last, len(items)))
    return out

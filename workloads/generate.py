"""Token generators: pure functions of a WorkloadSpec and the model's vocabulary."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from .jsonl import read_requests
from .request import Request
from .spec import ItemRange, WorkloadSpec

CONSTANT_QUERY_ID, CONSTANT_ITEM_ID = 1, 2  # the seeds' [1]*Q query and [2]*L items


def _draw(rng: np.random.Generator, n: int, vocab_size: int, exclude: np.ndarray) -> list[int]:
    """n ids uniform over [0, vocab_size) minus `exclude`, by rejection (exclude is tiny)."""
    out = rng.integers(0, vocab_size, size=n)
    bad = np.isin(out, exclude)
    while bad.any():
        out[bad] = rng.integers(0, vocab_size, size=int(bad.sum()))
        bad = np.isin(out, exclude)
    return out.tolist()


def item_lengths(spec: WorkloadSpec, rng: np.random.Generator) -> list[int]:
    """Per-item lengths: fixed, or uniform over the inclusive range (min, max)."""
    if isinstance(spec.item_tokens, ItemRange):
        lo, hi = spec.item_tokens.min, spec.item_tokens.max
        return rng.integers(lo, hi + 1, size=spec.num_items).tolist()
    return [int(spec.item_tokens)] * spec.num_items


def generate(spec: WorkloadSpec, vocab_size: int, exclude: Iterable[int] = ()) -> Request:
    """The generated request of `spec` (seeded: the same spec gives the same tokens)."""
    rng = np.random.default_rng(spec.seed)
    lengths = item_lengths(spec, rng)
    if spec.tokens == "constant":
        return Request(query=(CONSTANT_QUERY_ID,) * spec.query_tokens,
                       items=tuple((CONSTANT_ITEM_ID,) * n for n in lengths))
    banned = np.array(sorted(set(exclude) | ({spec.delimiter} - {None})), dtype=np.int64)
    query = _draw(rng, spec.query_tokens, vocab_size, banned)
    flat = _draw(rng, sum(lengths), vocab_size, banned)
    ends = np.cumsum(lengths).tolist()
    starts = [0] + ends[:-1]
    items = tuple(tuple(flat[s:e]) for s, e in zip(starts, ends, strict=True))
    return Request(query=tuple(query), items=items)


def materialize(spec: WorkloadSpec, vocab_size: int, exclude: Iterable[int] = (),
                tokenize: Callable[[str], list[int]] | None = None) -> list[Request]:
    """All requests of a workload, in token ids (text from a JSONL file is tokenized here,
    once, so timed runs never include tokenization)."""
    if spec.requests is None:
        return [generate(spec, vocab_size, exclude)]
    return read_requests(spec.requests, tokenize)


def total_items(requests: list[Request]) -> int:
    return sum(len(r.items) for r in requests)


def total_tokens(requests: list[Request], delimiter: int | None) -> int:
    """Tokens of the workload counted once: each query (plus its delimiter) and every item."""
    extra = 0 if delimiter is None else 1
    return sum(len(r.query) + extra + sum(len(i) for i in r.items) for r in requests)

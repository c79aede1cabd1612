"""Deliberate faults, for negative controls: leaks between items for batch invariance
(harness/jobs/invariance.py, docs/parity.md), each patching one internal of a mode so that
an item's scores depend on its neighbours, and scores that go wrong without a leak for
parity's `order`, `duplicates` and `degenerate` checks (harness/run/invariants.py): each
measurement must catch its fault. They live with the engines because they reach into the
modes' internals (the harness uses only the public surface, `from mibench.engines import
leaking`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import numpy as np

LEAKS = ("dense mask", "segment mask", "LM head rows", "scores", "item order",
         "repeated item", "same scores", "query ignored")
SHIFT = 1e-3  # how far (in log) a faulty score moves: 100x the float32 modes tolerance
FIXED_TOKEN = 1  # `query ignored`: every query token becomes this one (3 if it is the delimiter)


@contextlib.contextmanager
def leaking(kind: str, engine) -> Iterator[None]:
    """The leak control `kind` (one of LEAKS) switched on for the block: `dense mask`
    lets a packed item see every earlier token, `segment mask` makes every segment start at
    0, `LM head rows` mixes the extend rows before the head, `scores` moves each item's
    scores with the request's item count; without a leak: `item order` moves each item's
    scores with its position in the request, `repeated item` moves an item that repeats an
    earlier one of the request, `same scores` gives every item the first item's scores (a
    mode that scores nothing), `query ignored` scores every request as if its query were
    one repeated token (scores that do not move when the query changes)."""
    from unittest import mock

    from .modes import extend, packed
    from .modes.layout import PackedBatch

    if kind == "dense mask":
        dense = PackedBatch.dense_mask

        def leaky_mask(self):
            mask = dense(self)
            t = mask.shape[-1]
            return mask | np.tril(np.ones((t, t), bool))[None]
        patch = mock.patch.object(PackedBatch, "dense_mask", leaky_mask)
    elif kind == "segment mask":
        pack = packed.pack

        def leaky_pack(*a, **kw):
            b = pack(*a, **kw)
            return dataclasses.replace(b, seg_start_bi=np.zeros_like(b.seg_start_bi))
        patch = mock.patch.object(packed, "pack", leaky_pack)
    elif kind == "LM head rows":
        join = extend.join_rows

        def leaky_rows(*a, **kw):
            h = join(*a, **kw)
            return h + 0.01 * h.mean(axis=0, keepdims=True)
        patch = mock.patch.object(extend, "join_rows", leaky_rows)
    else:
        patch = mock.patch.object(engine, "score", _faulty_score(kind, engine.score))
    with patch:
        yield


def _faulty_score(kind: str, score):
    """`score` with the fault `kind` (a LEAKS entry that patches the engine's scores)."""
    if kind == "query ignored":
        def fixed(query, items, labels, *a, delimiter=None, **kw):
            token = FIXED_TOKEN if FIXED_TOKEN != delimiter else FIXED_TOKEN + 2
            return score([token] * len(query), items, labels, *a, delimiter=delimiter, **kw)
        return fixed

    def faulty(query, items, *a, **kw):
        out = score(query, items, *a, **kw)
        rows = [list(row) for row in out.scores]
        if kind == "scores":  # each item's scores move with the request's other items
            rows = [[s * np.exp(SHIFT * (len(items) - 1)) for s in row] for row in rows]
        elif kind == "item order":
            rows = [[s * np.exp(SHIFT * i) for s in row] for i, row in enumerate(rows)]
        elif kind == "repeated item":
            seen: set[tuple] = set()
            for i, item in enumerate(items):
                if tuple(item) in seen:
                    rows[i] = [s * np.exp(SHIFT) for s in rows[i]]
                seen.add(tuple(item))
        elif kind == "same scores":
            rows = [list(rows[0]) for _ in rows]
        else:
            raise ValueError(f"unknown fault {kind!r} (known: {', '.join(LEAKS)})")
        return dataclasses.replace(out, scores=rows)
    return faulty

"""Deliberate leaks between items, for the negative controls of batch invariance
(harness/jobs/invariance.py, docs/parity.md): each patches one internal of a mode so that an
item's scores depend on its neighbours, and the invariance measurement must catch it. They
live with the engines because they reach into the modes' internals (the harness uses only
the public surface, `from mibench.engines import leaking`)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import numpy as np

KINDS = ("dense mask", "segment mask", "LM head rows", "scores")


@contextlib.contextmanager
def leaking(kind: str, engine) -> Iterator[None]:
    """The leak control `kind` (one of KINDS) switched on for the block: `dense mask`
    lets a packed item see every earlier token, `segment mask` makes every segment start at
    0, `LM head rows` mixes the extend rows before the head, `scores` moves each item's
    scores with the request's item count."""
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
    else:  # "scores": each item's scores move with the request's other items
        score = engine.score

        def leaky_score(query, items, *a, **kw):
            out = score(query, items, *a, **kw)
            shift = np.exp(1e-3 * (len(items) - 1))
            return dataclasses.replace(out, scores=[[s * shift for s in row]
                                                    for row in out.scores])
        patch = mock.patch.object(engine, "score", leaky_score)
    with patch:
        yield

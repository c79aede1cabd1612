"""Mode `single`: one causal forward per item, batch 1, in order: `query d item` under
delimited semantics, `query item` under plain. The baseline every other mode is compared
with."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ..attention_paths import Paths
from ..jax_model import decoder, label_scores
from ..request import ScoreRequest
from ..sharding import to_host
from .layout import bucket_length


@functools.partial(jax.jit, static_argnames=("cfg", "apply_softmax", "attn"))
def score_last_token(params, tokens_1t, last, labels, cfg, apply_softmax: bool, attn: Paths):
    """Causal forward of one (right-padded) sequence; scores of the row at `last`.
    Attention is the causal kernel of the prefill (on xla, tiles past `last` skipped), so
    the baseline is a fair one; `packed` with the dense mask still runs the plain masked
    attention, and the torch reference a third implementation."""
    t = tokens_1t.shape[1]
    positions_1t = jnp.arange(t, dtype=jnp.int32)[None]
    key_len_1 = jnp.reshape(last + 1, (1,))
    h_1td = decoder(params, tokens_1t, positions_1t, cfg,
                    lambda q, k, v, _: attn.causal(q, k, v, key_len_1))
    return label_scores(params, h_1td[0, last][None], labels, apply_softmax)  # [1, labels]


def score_single(engine, req: ScoreRequest, **options) -> np.ndarray:
    """Mode `single`: one forward per item, batch 1, in order. Option: `attention`."""
    attn = engine.attention(options)
    labels = np.asarray(req.labels, np.int32)
    rows = []
    for i in range(len(req.items)):
        seq = req.sequence(i)
        tokens = np.zeros((1, bucket_length(len(seq))), np.int32)
        tokens[0, : len(seq)] = seq
        rows.append(score_last_token(engine.params, tokens, len(seq) - 1, labels,
                                     engine.cfg, req.apply_softmax, attn))
    return np.concatenate([to_host(r) for r in rows])

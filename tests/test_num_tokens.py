"""`ScoreResult.num_tokens` is what each mode ran through the model, padding excluded, on
both engines: a prefix counts once per sequence that holds it, delimiters between packed
items count."""

from __future__ import annotations

import pytest
from conftest import DELIM, LABELS, random_request

from mibench.engines import MODES

QUERY, ITEMS = random_request(21, query_len=20, num_items=7, item_len=(1, 9))
Q, N, ITEM_TOKENS = len(QUERY), len(ITEMS), sum(map(len, ITEMS))
P = Q + 1  # query and delimiter

JAX_CASES = [  # (mode, options, delimiter, expected)
    ("single", {}, DELIM, N * P + ITEM_TOKENS),
    ("single", {}, None, N * Q + ITEM_TOKENS),
    ("packed", {"mask": "segment"}, DELIM, P + ITEM_TOKENS + N),
    ("packed", {"mask": "dense"}, DELIM, P + ITEM_TOKENS + N),
    ("chunked", {"chunk_size": 3}, DELIM, 3 * P + ITEM_TOKENS + N),  # chunks of 3, 3, 1
    ("chunked", {"chunk_size": 3, "schedule": "sequential"}, DELIM, 3 * P + ITEM_TOKENS + N),
    ("chunked", {}, DELIM, P + ITEM_TOKENS + N),  # default chunk size holds all 7
    ("prefill_extend", {"extend_batch_size": 3}, DELIM, P + ITEM_TOKENS),
    ("prefill_extend", {"extend_batch_size": 3}, None, Q + ITEM_TOKENS),
]
TORCH_CASES = [
    ("single", {}, DELIM, N * P + ITEM_TOKENS),
    ("single", {}, None, N * Q + ITEM_TOKENS),
    ("prefill_extend", {"extend_batch_size": 3}, DELIM, P + ITEM_TOKENS),
    ("prefill_extend", {"extend_batch_size": 3}, None, Q + ITEM_TOKENS),
]


def _id(case):
    mode, opts, delimiter, _ = case
    return f"{mode}{list(opts.values())}-{'plain' if delimiter is None else 'delimited'}"


# the fast tier counts single here and every mode under both semantics in test_semantics'
# test_num_tokens_under_plain; the other modes' counts on this request are the slow tier's
@pytest.mark.parametrize("case", [
    pytest.param(c, id=_id(c), marks=() if c[0] == "single" else pytest.mark.slow)
    for c in JAX_CASES])
def test_jax_counts_what_each_mode_runs(jax_tiny, case):
    mode, opts, delimiter, expected = case
    result = jax_tiny.score(QUERY, ITEMS, LABELS, mode=mode, delimiter=delimiter, **opts)
    assert result.num_tokens == expected


@pytest.mark.parametrize("case", TORCH_CASES, ids=map(_id, TORCH_CASES))
def test_torch_counts_what_each_mode_runs(torch_tiny, case):
    mode, opts, delimiter, expected = case
    result = torch_tiny.score(QUERY, ITEMS, LABELS, mode=mode, delimiter=delimiter, **opts)
    assert result.num_tokens == expected


def test_the_counts_tell_the_modes_apart():
    """Control: a count that ignored the mode (query and items once) would fail above."""
    def count(mode, lens, **options):
        return MODES["jax"][mode].num_tokens(P, lens, options, "delimited")

    counts = {mode: count(mode, [len(i) for i in ITEMS], chunk_size=3)
              for mode in ("single", "packed", "chunked", "prefill_extend")}
    assert len(set(counts.values())) == 4
    assert count("chunked", [2] * 6, chunk_size=6) == count("packed", [2] * 6)

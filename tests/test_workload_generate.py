"""Workload generators: seeded, avoiding the delimiter and special ids; JSONL requests."""

from __future__ import annotations

import json

import pytest

from mibench.engines import MibenchError
from mibench.workloads import (
    ItemRange,
    WorkloadSpec,
    generate,
    materialize,
    total_items,
    total_tokens,
)
from mibench.workloads.jsonl import read_requests

DELIM = 151643


def spec(**kw):
    base = dict(query_tokens=64, num_items=16, item_tokens=8, label_token_ids=(198,),
                delimiter=DELIM)
    return WorkloadSpec(**{**base, **kw})


def test_random_is_seeded_and_shaped():
    a, b = generate(spec(), 151936), generate(spec(), 151936)
    assert a == b
    assert a != generate(spec(seed=1), 151936)
    assert len(a.query) == 64 and len(a.items) == 16
    assert all(len(i) == 8 for i in a.items)


def test_random_avoids_delimiter_and_specials():
    # a tiny vocabulary makes collisions certain without the exclusion
    r = generate(spec(query_tokens=500, delimiter=3, item_tokens=50), vocab_size=6,
                 exclude={0, 5})
    seen = set(r.query) | {t for i in r.items for t in i}
    assert seen == {1, 2, 4}


def test_constant_is_the_seeds_tokens():
    r = generate(spec(tokens="constant", query_tokens=5, num_items=2, item_tokens=3), 151936)
    assert r.query == (1,) * 5 and r.items == ((2, 2, 2), (2, 2, 2))


def test_uniform_lengths_cover_the_range():
    r = generate(spec(num_items=400, item_tokens=ItemRange(dist="uniform", min=4, max=8)),
                 151936)
    lengths = {len(i) for i in r.items}
    assert lengths == {4, 5, 6, 7, 8}


def test_counts():
    reqs = materialize(spec(num_items=3, item_tokens=2, query_tokens=4), 151936)
    assert total_items(reqs) == 3
    assert total_tokens(reqs, DELIM) == 4 + 1 + 6
    assert total_tokens(reqs, None) == 4 + 6


def test_jsonl_text_and_ids(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text("# comment\n" + json.dumps({"query": "ab", "items": ["c", "de"]}) + "\n\n"
                    + json.dumps({"query": [1, 2], "items": [[3]]}) + "\n")
    reqs = materialize(spec(requests=str(path)), 151936,
                       tokenize=lambda text: [ord(ch) for ch in text])
    assert reqs[0].query == (97, 98) and reqs[0].items == ((99,), (100, 101))
    assert reqs[1].query == (1, 2) and total_items(reqs) == 3


@pytest.mark.parametrize("line,needle", [
    ('{"query": [1], "items": []}', "non-empty"),
    ('{"query": [1], "items": [[1.5]]}', "token ids"),
    ('{"query": [1], "items": [[1]], "x": 2}', "nothing else"),
    ('{"query": [1], ', "invalid JSON"),
    ('{"query": "text", "items": [[1]]}', "no tokenizer"),
])
def test_jsonl_errors_name_the_line(tmp_path, line, needle):
    path = tmp_path / "r.jsonl"
    path.write_text('{"query": [1], "items": [[2]]}\n' + line + "\n")
    with pytest.raises(MibenchError) as e:
        read_requests(path)
    assert needle in str(e.value) and "r.jsonl:2" in str(e.value)


def test_missing_jsonl(tmp_path):
    with pytest.raises(MibenchError, match="no such requests file"):
        read_requests(tmp_path / "none.jsonl")

"""Text is checked at the edge (mibench/checks.py `text_problem`): a lone surrogate (JSON's
`"\\ud800"`) or a command-line byte that is not UTF-8 is an error naming the field before
any tokenizer or server sees it. The CLI, the JSONL and `--request` files and the jax
engine's Python API are covered by tests/test_bad_inputs.py's tables; `mibench serve` by
tests/test_serve.py."""

from __future__ import annotations

import pytest

from mibench.checks import invalid_text, text_problem
from mibench.engines import InputError, load_engine


def test_text_problem_names_the_character_and_words_argv_bytes_as_bytes():
    assert text_problem("caf\u00e9 \U0001f600") is None
    assert text_problem("ab\ud800") == ("holds a lone surrogate (\\ud800 at character 2), "
                                        "which is not Unicode text")
    assert text_problem("a\udcff", from_argv=True) == "is not UTF-8 text: byte 0xff at " \
                                                      "character 1"
    assert text_problem("a\ud800", from_argv=True).startswith("holds a lone surrogate")


def test_invalid_text_finds_the_path_in_json_data():
    assert invalid_text({"query": "ok", "items": [[1], "x", "y\udfff"]}) == (
        "items[2]", "holds a lone surrogate (\\udfff at character 1), which is not Unicode "
                    "text")
    assert invalid_text({"mibench": {"mask": "\ud800"}})[0] == "mibench.mask"
    assert invalid_text({"a\ud800": 1}) == ("", "has a key that holds a lone surrogate "
                                                "(\\ud800 at character 1), which is not "
                                                "Unicode text")
    assert invalid_text({"query": [1, 2], "items": ["fine"]}) is None


@pytest.mark.parametrize("query,items,field", [("a\ud800b", ["x"], "query"),
                                               ("ab", ["x", "y\udfff"], "items[1]")])
def test_the_http_engine_refuses_text_that_is_not_unicode_before_sending(query, items, field):
    """Nothing listens on port 9: the error comes before any connection."""
    engine = load_engine("http", model="served-elsewhere", base_url="http://127.0.0.1:9")
    with pytest.raises(InputError) as err:
        engine.score(query, items, [198])
    assert err.value.field == field and "lone surrogate" in str(err.value)


def test_the_torch_engine_refuses_it_naming_the_field(torch_tiny):
    """Before: a TypeError from the tokenizer (`TextEncodeInput must be Union[...]`)."""
    with pytest.raises(InputError, match=r"^items\[0\]: holds a lone surrogate"):
        torch_tiny.score("fine", ["\udc80"], [198])


# --- a text against its model's positions: bounded before it is tokenized -----------------

TEXT_CONFIG = """\
name: text
model: {path: "embedded:tiny"}
workload: {requests: r.jsonl, label_token_ids: [198], delimiter: 151643}
runs: {warmup: 0, timed: 1}
cases:
  - {engine: jax, mode: single}
"""


def _text_config(tmp_path, query: str):
    import json

    (tmp_path / "r.jsonl").write_text(json.dumps({"query": query, "items": ["a b", "c"]}) + "\n")
    (tmp_path / "c.yaml").write_text(TEXT_CONFIG)
    return tmp_path / "c.yaml"


def _validate(path):
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    return CliRunner().invoke(app, ["validate", str(path)])


def test_a_text_past_the_character_bound_is_refused_before_any_tokenizing(tmp_path,
                                                                           monkeypatch):
    """Issue 45: a 100 MB text query passed `validate` (text was never length-checked) and
    `run` then took 6 GB and 40 s. A text longer than the model's positions x its longest
    token's characters (tiny: 40,960 x 13) cannot fit: refused from its length, no tokenizer
    loaded, in validate and in run's reading of the file alike."""
    def no_tokenizer(model):
        raise AssertionError("a tokenizer was loaded for a text refused by its length")

    monkeypatch.setattr("mibench.engines.facts.tokenizer_of", no_tokenizer)
    query = "hello world " * 50_000  # 600,000 characters
    out = _validate(_text_config(tmp_path, query))
    assert out.exit_code == 2, out.output
    line, = out.output.strip().splitlines()
    assert "r.jsonl:1 query: 600000 characters of text" in line and "532480" in line, line
    from mibench.engines import TextBound, TextTooLong
    from mibench.workloads.jsonl import read_requests

    calls = []
    bound = TextBound("embedded:tiny", 40960, lambda t: calls.append(t) or [1] * len(t))
    with pytest.raises(TextTooLong, match=r"r.jsonl:1 query: 600000 characters"):
        read_requests(tmp_path / "r.jsonl", bound)
    assert calls == []


def test_a_text_past_the_positions_is_refused_by_its_tokens_after_bounded_work(tmp_path):
    """Within the character bound but past the positions in tokens (one token a byte
    here): validate refuses it naming the count, and reading it for a run tokenizes about
    the positions' worth of text, not all of it."""
    query = "ab " * 100_000  # 300,000 characters and tokens
    out = _validate(_text_config(tmp_path, query))
    assert out.exit_code == 2, out.output
    assert "r.jsonl:1 query: more than 40960 tokens" in out.output, out.output
    from mibench.engines import TextBound, TextTooLong
    from mibench.workloads.jsonl import read_requests

    seen = []
    bound = TextBound("embedded:tiny", 40960, lambda t: seen.append(len(t)) or [1] * len(t))
    with pytest.raises(TextTooLong, match="more than 40960 tokens"):
        read_requests(tmp_path / "r.jsonl", bound)
    assert sum(seen) < 40960 + 2 * 16 * 1024, sum(seen)
    # a text within the positions is read and tokenized as before
    assert _validate(_text_config(tmp_path, "ab " * 1000)).exit_code == 0

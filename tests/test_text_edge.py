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

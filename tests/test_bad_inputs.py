"""Hostile inputs, table by table: the CLI, configs (`validate` and `load_config`), request
files, the Python API and artifacts. Every one must be an expected failure: exit 2 with
exactly one `error: ...` line naming the field or file (the API: a MibenchError naming its
field), never a traceback, and nothing big allocated on the way (memory bombs are refused
by estimate). A few real subprocesses prove no traceback reaches stderr."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import DELIM, LABELS
from typer.testing import CliRunner

from mibench.engines import MibenchError, load_engine
from mibench.engines.presets import PRESETS, hf_config
from mibench.harness.cli import app
from mibench.harness.config import ConfigError, load_config

ROOT = Path(__file__).resolve().parents[1]
GOOD_ARTIFACT = ROOT / "tests" / "data" / "run-cpu-smoke.json"
runner = CliRunner()

BASE = """\
name: t
model: {path: "embedded:tiny"}
workload:
  query_tokens: 8
  num_items: 4
  item_tokens: 2
  label_token_ids: [198, 9834]
  delimiter: 151643
runs: {warmup: 0, timed: 1}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed, mask: [dense, segment]}
  - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
"""


def one_line_error(result, *needles: str) -> str:
    """Exit 2, exactly one line of output, `error: ...` holding every needle, no
    traceback; returns the line."""
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        repr(result.exception), result.output)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


# --- the world: files every table points at -----------------------------------------------


def _alias_bomb(levels: int = 9, width: int = 9) -> str:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    for n in range(1, levels):
        lines.append(f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * width)}]")
    return "\n".join(lines) + "\nname: t\n"


def _set_bomb(levels: int = 6) -> str:
    parts = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for n in range(1, levels):
        parts.append(f"&a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    return "description=[" + ", ".join(parts) + "]"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Path:
    w = tmp_path_factory.mktemp("world")
    tiny = hf_config(PRESETS["tiny"])

    def folder(name: str, config: str | None, weights: bool = True) -> None:
        (w / name).mkdir()
        if config is not None:
            (w / name / "config.json").write_text(config)
        if weights:
            (w / name / "model.safetensors").write_bytes(b"")

    folder("no-config", None)
    folder("bad-json", "{not json")
    folder("list-json", "[1, 2]")
    folder("no-vocab", json.dumps({k: v for k, v in tiny.items() if k != "vocab_size"}))
    folder("mamba", json.dumps({**tiny, "model_type": "mamba"}))
    folder("str-vocab", json.dumps({**tiny, "vocab_size": "lots"}))
    folder("zero-vocab", json.dumps({**tiny, "vocab_size": 0}))
    folder("no-weights", json.dumps(tiny), weights=False)
    (w / "requests").mkdir()
    (w / "binary.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe\x00")
    (w / "a-file").write_text("not a folder\n")
    (w / "big.json").write_text(json.dumps({"query": [1], "items": [[2]] * 200_000}))
    (w / "good.json").write_text(json.dumps({"query": [1, 2], "items": [[3], [4]]}))
    (w / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    return w


@pytest.fixture
def cfg(tmp_path, world):
    """Write BASE with replacements (`{W}` is the world folder); returns its path."""

    def make(*edits: tuple[str, str], text: str | None = None, name: str = "c.yaml") -> Path:
        body = BASE if text is None else text
        for old, new in edits:
            assert old in body, old
            body = body.replace(old, new)
        path = tmp_path / name
        path.write_text(body.replace("{W}", str(world)))
        return path

    return make


# --- configs: `mibench validate` and `load_config` -------------------------------------

R = "  - {engine: jax, mode: prefill_extend, extend_batch_size: 4}"  # the last case line
CONFIGS = [
    # memory bombs: refused by estimate, nothing is built
    ([("num_items: 4", "num_items: 1000000000")], ["c.yaml:5", "workload.num_items",
                                                   "host memory", "token lists"]),
    ([("num_items: 4", "num_items: [4, 1000000000]")], ["workload.num_items.1", "host memory"]),
    ([("num_items: 4", "num_items: 300000"), ("mask: [dense, segment]", "mask: dense")],
     ["cases.1.mask", "dense mask"]),
    ([(R, R + "\n  - {engine: jax, mode: chunked, chunk_size: 100000, mask: dense}"),
      ("num_items: 4", "num_items: 200000"), ("mask: [dense, segment]", "mask: segment")],
     ["cases.3.mask", "dense mask"]),
    ([("- {engine: jax, mode: single}", "- {engine: jax, mode: single, workload: "
       "{num_items: 999999999}}")], ["cases.0.workload.num_items", "host memory"]),
    ([(R, "  - {engine: jax, mode: prefill_extend, extend_batch_size: 4, precompile_bs: "
          "[100000000000]}"), ("item_tokens: 2", "item_tokens: 500")],
     ["cases.2.precompile_bs", "extend batch"]),
    ([("num_items: 4", "num_items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, "
       "18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]"),
      ("query_tokens: 8", "query_tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, "
       "16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]"),
      ("item_tokens: 2", "item_tokens: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]")],
     ["cases", "at most 10000"]),
    # YAML that would blow up or loop while being read
    ("alias-bomb", ["c.yaml:", "expands to more than 100000 values"]),
    ("name: t\nx: &a [1, *a]\n", ["c.yaml:2", "alias *a inside its own anchor"]),
    ("name: t\nx: " + "[" * 100 + "]" * 100 + "\n", ["c.yaml:2", "nested more than 64"]),
    ("name: t\nx: " + "{a: " * 80 + "1" + "}" * 80 + "\n", ["nested more than 64"]),
    ("name: t\nseed: " + "9" * 5000 + "\n", ["c.yaml", "invalid YAML"]),
    ("name: t\n--- \nname: u\n", ["c.yaml", "invalid YAML"]),
    ("name: t\nx: *nowhere\n", ["c.yaml:2", "invalid YAML", "undefined alias"]),
    ("name: t\nx: !!python/object:os.system {}\n", ["c.yaml:2", "invalid YAML"]),
    ("name: t\nx: \x07\n", ["c.yaml", "invalid YAML"]),
    ("- a\n- b\n", ["c.yaml:1", "mapping at the top"]),
    ("name: [t\n", ["c.yaml", "invalid YAML"]),
    ("include: {W}/binary.bin\nname: t\n", ["binary.bin", "not a text file"]),
    ("include: {W}/requests\nname: t\n", ["c.yaml:1", "include", "not found"]),
    ("include: [" + ", ".join(["c2.yaml"] * 70) + "]\n", ["include", "more than 64"]),
    # the models: known by name or by their config.json, never loaded
    ([('"embedded:tiny"', '"embedded:nope"')], ["c.yaml:2", "model.path", "unknown preset"]),
    ([('"embedded:tiny"', '"embedded:"')], ["model.path", "unknown preset ''"]),
    ([('"embedded:tiny"', '["embedded:tiny", "embedded:tyni"]')],
     ["model.path.1", "unknown preset 'tyni'"]),
    ([('"embedded:tiny"', '"{W}/missing"')], ["model.path", "no such checkpoint folder"]),
    ([('"embedded:tiny"', '"{W}/a-file"')], ["model.path", "no such checkpoint folder"]),
    ([('"embedded:tiny"', '"{W}/no-config"')], ["model.path", "no config.json"]),
    ([('"embedded:tiny"', '"{W}/no-weights"')], ["model.path", "no *.safetensors"]),
    ([('"embedded:tiny"', '"{W}/bad-json"')], ["model.path", "config.json", "invalid JSON"]),
    ([('"embedded:tiny"', '"{W}/list-json"')], ["model.path", "must be a JSON object"]),
    ([('"embedded:tiny"', '"{W}/no-vocab"')], ["model.path", "missing key 'vocab_size'"]),
    ([('"embedded:tiny"', '"{W}/mamba"')], ["model.path", "unsupported architecture"]),
    ([('"embedded:tiny"', '"{W}/str-vocab"')], ["model.path", "config.json", "malformed"]),
    ([('"embedded:tiny"', '"{W}/zero-vocab"')], ["model.path", "vocab_size is 0"]),
    ([('"embedded:tiny"', "123")], ["model.path", "valid string"]),
    # against the model: vocabulary, maximum length, the delimiter
    ([("delimiter: 151643", "delimiter: 151936")], ["c.yaml:8", "workload.delimiter",
                                                    "outside the vocabulary"]),
    ([("[198, 9834]", "[198, 200000]")], ["c.yaml:7", "workload.label_token_ids.1",
                                          "label 200000 is outside the vocabulary"]),
    ([("- {engine: jax, mode: single}", "- {engine: jax, mode: single, workload: "
       "{label_token_ids: [999999]}}")], ["cases.0.workload.label_token_ids", "999999"]),
    ([("query_tokens: 8", "query_tokens: 50000")], ["workload.query_tokens",
                                                    "longer than the maximum"]),
    ([("item_tokens: 2", "item_tokens: 41000")], ["workload.query_tokens", "item (41000)"]),
    ([("item_tokens: 2", "item_tokens: {dist: uniform, min: 1, max: 40955}")],
     ["longer than the maximum"]),
    ([("  delimiter: 151643\n", "")], ["workload.delimiter", "needs a delimiter token"]),
    ([("delimiter: 151643", "delimiter: 1\n  tokens: constant")],
     ["workload.delimiter", "constant workload"]),
    ([("delimiter: 151643", "delimiter: 2\n  tokens: constant")], ["workload.delimiter"]),
    # prefill_extend: precompile_bs must hold extend_batch_size
    ([(R, "  - {engine: jax, mode: prefill_extend, extend_batch_size: 8, precompile_bs: "
          "[1, 2]}")], ["c.yaml:13", "cases.2.precompile_bs", "cannot hold extend_batch_size=8"]),
    ([(R, "  - {engine: jax, mode: prefill_extend, precompile_bs: [1, 2, 4]}")],
     ["cases.2.precompile_bs", "extend_batch_size=12"]),
    ([(R, "  - {engine: jax, mode: prefill_extend, precompile_bs: [[1, 16], [2, 4]]}")],
     ["cases.2.precompile_bs", "[2, 4]"]),
    # strict types: a bool is not an integer, a float not an integer, a number not a bool
    ([("num_items: 4", "num_items: true")], ["c.yaml:5", "workload.num_items", "got true"]),
    ([("num_items: 4", "num_items: [4, false]")], ["workload.num_items", "got false"]),
    ([("num_items: 4", "num_items: 4.0")], ["workload.num_items", "got 4.0"]),
    ([("query_tokens: 8", "query_tokens: '8'")], ["workload.query_tokens", "got '8'"]),
    ([("item_tokens: 2", "item_tokens: true")], ["workload.item_tokens"]),
    ([("item_tokens: 2", "item_tokens: {dist: uniform, min: true, max: 3}")],
     ["workload.item_tokens.min"]),
    ([("delimiter: 151643", "delimiter: true")], ["workload.delimiter", "got true"]),
    ([("[198, 9834]", "[198, true]")], ["workload.label_token_ids.1", "got true"]),
    ([("[198, 9834]", "[198, -1]")], ["workload.label_token_ids.1", "greater than or equal"]),
    ([("[198, 9834]", "[]")], ["workload.label_token_ids"]),
    ([("delimiter: 151643", "delimiter: 151643\n  apply_softmax: 1")],
     ["workload.apply_softmax", "valid boolean, got 1"]),
    ([("delimiter: 151643", "delimiter: 151643\n  apply_softmax: 'no'")],
     ["workload.apply_softmax"]),
    ([("delimiter: 151643", "delimiter: 151643\n  seed: -1")],
     ["c.yaml:9", "workload.seed", "greater than or equal to 0"]),
    ([("delimiter: 151643", "delimiter: 151643\n  seed: 1.5")], ["workload.seed", "got 1.5"]),
    ([("delimiter: 151643", "delimiter: 151643\n  seed: true")], ["workload.seed", "got true"]),
    ([("runs: {warmup: 0, timed: 1}", "runs: {warmup: 0, timed: true}")], ["runs.timed"]),
    ([("runs: {warmup: 0, timed: 1}", "runs: {warmup: false, timed: 1}")], ["runs.warmup"]),
    ([("runs: {warmup: 0, timed: 1}", "runs: {warmup: 0, timed: 1, timeout_s: .inf}")],
     ["runs.timeout_s", "finite"]),
    ([("runs: {warmup: 0, timed: 1}", "runs: {warmup: 0, timed: 1, timeout_s: true}")],
     ["runs.timeout_s"]),
    ([('model: {path: "embedded:tiny"}', 'model: {path: "embedded:tiny"}\ntopology: {tp: '
       'true}')], ["topology.tp", "got true"]),
    ([('model: {path: "embedded:tiny"}', 'model: {path: "embedded:tiny", dtype: [float32, '
       'true]}')], ["model.dtype.1"]),
    ([(R, "  - {engine: jax, mode: chunked, chunk_size: true}")], ["cases.2.chunk_size"]),
    ([(R, "  - {engine: jax, mode: chunked, chunk_size: 0}")], ["cases.2.chunk_size"]),
    ([(R, "  - {engine: jax, mode: prefill_extend, extend_batch_size: 4.5}")],
     ["cases.2.extend_batch_size"]),
    ([(R, "  - {engine: jax, mode: prefill_extend, precompile_bs: [true]}")],
     ["cases.2.precompile_bs"]),
    ([(R, "  - {engine: jax, mode: packed, mask: 1}")], ["cases.2.mask"]),
    ([(R, "  - {engine: 1, mode: packed}")], ["cases.2.engine"]),
    (BASE + "parity: {min_speedup: true}\n", ["parity.min_speedup"]),
    # a misspelt name among a field's few (a Literal): the closest is offered
    (BASE + "parity: {checks: [isolatoin]}\n",
     ["parity.checks.0", "got 'isolatoin'; did you mean 'isolation'?"]),
    ([("name: t", "name: 123")], ["c.yaml:1", "name", "valid string"]),
    ([("name: t", "name: 'a b'")], ["name", "pattern"]),
    ([("- {engine: jax, mode: single}", "- {engine: jax, mode: single, workload: "
       "{requests: x.jsonl}}")], ["c.yaml:11", "cases.0.workload", "not both"]),
    # the parity workload is checked like the workload
    (BASE + "parity: {workload: {requests: x.jsonl}}\n", ["parity.workload", "not both"]),
    (BASE + "parity: {workload: {label_token_ids: [300000]}}\n",
     ["parity.workload.label_token_ids", "300000"]),
    (BASE + "parity: {workload: {delimiter: 999999}}\n", ["parity.workload.delimiter"]),
    # requests files: named at load, not at run time
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: nope.jsonl, "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["c.yaml:3", "workload.requests", "nope.jsonl", "no such requests file"]),
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: '{W}/requests', "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["workload.requests", "is a folder"]),
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: '', "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["workload.requests", "is a folder"]),
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: \"a\\0b\", "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["workload.requests"]),
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: '{W}/binary.bin', "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["workload.requests", "binary.bin", "not a text file"]),
    ("name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: 5, "
     "label_token_ids: [1]}\ncases: [{engine: jax, mode: single}]\n",
     ["workload.requests", "valid string"]),
]


def _config_text(spec, world: Path) -> tuple[list, str | None]:
    if spec == "alias-bomb":
        return [], _alias_bomb()
    if isinstance(spec, str):
        return [], spec
    return spec, None


@pytest.mark.parametrize("spec,needles", CONFIGS)
def test_bad_config(cfg, world, spec, needles):
    edits, text = _config_text(spec, world)
    cfg(text=BASE, name="c2.yaml")  # what the include rows include
    path = cfg(*edits, text=text)
    one_line_error(invoke("validate", path), *needles)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert all(n in str(err.value) for n in needles), str(err.value)


def test_binary_config_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: t\n\xff\xfe\x00binary")
    one_line_error(invoke("validate", path), "c.yaml:2", "not a text file")


SETS = [
    ("workload.num_items", ["--set workload.num_items", "KEY=VALUE"]),
    ("=1", ["--set =1", "empty key"]),
    ("workload..x=1", ["empty key"]),
    ("name.x=1", ["--set name.x=1", "name: is a string", "'x'"]),
    ("name.0=1", ["name: is a string"]),
    ("workload.num_items.0=1", ["workload.num_items: is a number"]),
    ("cases.0.mode.x=1", ["cases.0.mode: is a string"]),
    ("workload.delimiter.x.y=1", ["workload.delimiter: is a number"]),
    ("cases.9.mode=single", ["cases.9", "no such list element"]),
    ("cases.x.mode=single", ["cases.x", "no such list element"]),
    ("workload.num_items=[", ["--set workload.num_items=[", "invalid YAML"]),
    ("workload.num_items=*a", ["invalid YAML"]),
    ("workload.num_items=true", ["workload.num_items", "got true"]),
    ("workload.seed=-5", ["workload.seed", "greater than or equal to 0"]),
    ("model.path=embedded:nope", ["model.path", "unknown preset"]),
    ("workload.num_items=1000000000", ["workload.num_items", "host memory"]),
    ("workload.label_token_ids=[999999]", ["workload.label_token_ids", "999999"]),
    ("workload.delimiter=null", ["workload.delimiter", "needs a delimiter"]),
    ("cases.2.precompile_bs=[1]", ["cases.2.precompile_bs", "cannot hold"]),
    ("\u00b2=1", ["unknown key"]),
    ("SET_BOMB", ["expands to more than 100000 values"]),
]


@pytest.mark.parametrize("assignment,needles", SETS)
def test_bad_set(cfg, assignment, needles):
    assignment = _set_bomb() if assignment == "SET_BOMB" else assignment
    path = cfg()
    one_line_error(invoke("validate", path, "--set", assignment), *needles)
    with pytest.raises(ConfigError):
        load_config(path, [assignment])


JSONL = [
    ("", ["workload.requests", "no requests in file"]),
    ("# only a comment\n\n", ["no requests in file"]),
    ('{"query": [1], "items": [[2]]}\n{"query": [1], ', ["reqs.jsonl:2", "invalid JSON"]),
    ("[1, 2]", ["reqs.jsonl:1", "expected {"]),
    ('"text"', ["reqs.jsonl:1", "got a string"]),
    ('{"query": [1], "items": [[2]], "labels": [1]}', ["nothing else", "'labels'"]),
    ('{"query": [1]}', ["items is missing"]),
    ('{"items": [[1]]}', ["query is missing"]),
    ('{"query": [1], "items": "abc"}', ["items must be a non-empty list", "a string is one"]),
    ('{"query": [1], "items": []}', ["non-empty list", "got an empty list"]),
    ('{"query": [1], "items": [2, 3]}', ["items[0] must be a list of token ids"]),
    ('{"query": [1], "items": ["a", [2]]}', ["items mixes text (items[0]) and token ids"]),
    ('{"query": {"a": 1}, "items": [[1]]}', ["query must be a list", "got an object"]),
    ('{"query": [], "items": [[1]]}', ["query is an empty list"]),
    ('{"query": "", "items": [[1]]}', ["query is an empty string"]),
    ('{"query": [1.5], "items": [[1]]}', ["query: token 0 is 1.5"]),
    ('{"query": [true], "items": [[1]]}', ["query: token 0 is True"]),
    ('{"query": [1], "items": [[-1]]}', ["items[0]: token 0 is -1"]),
    ('{"query": [1], "items": [[2], []]}', ["items[1] is an empty list"]),
    ('{"query": [1], "items": [[2], null]}', ["items[1] must be a list", "got null"]),
    ('{"query": [1], "items": [[999999]]}', ["reqs.jsonl:1 items[0]", "999999",
                                             "outside the vocabulary"]),
    ('{"query": [151643], "items": [[2]]}', ["reqs.jsonl:1 query", "holds the delimiter"]),
    ('{"query": [1], "items": [[2, 151643]]}', ["items[0]", "holds the delimiter"]),
    (json.dumps({"query": [1] * 41000, "items": [[2]]}), ["reqs.jsonl:1", "longer than"]),
    ("[" * 100_000 + "]" * 100_000, ["reqs.jsonl:1", "invalid JSON"]),
    # text that is not Unicode: a lone surrogate escape is named, not "expected {...}"
    ('{"query": "a\\ud800b", "items": ["x"]}',
     ["reqs.jsonl:1: query holds a lone surrogate (\\ud800 at character 1)", "not Unicode"]),
    ('{"query": "ab", "items": ["x", "y\\udfff"]}', ["reqs.jsonl:1: items[1] holds a lone"]),
]


@pytest.mark.parametrize("content,needles", JSONL)
def test_bad_requests_file_in_config(cfg, tmp_path, content, needles):
    (tmp_path / "reqs.jsonl").write_text(content + "\n")
    path = cfg(text="name: t\nmodel: {path: 'embedded:tiny'}\nworkload: {requests: reqs.jsonl, "
                    "label_token_ids: [198], delimiter: 151643}\n"
                    "cases: [{engine: jax, mode: single}]\n")
    one_line_error(invoke("validate", path), "c.yaml:3", "workload.requests", *needles)


# --- `mibench score`: flags, request files --------------------------------------------


@pytest.fixture(scope="module")
def one_engine():
    """`mibench score` loads its engine with mibench.engines.load_engine: load each
    (engine, model, dtype, tp) once for the whole table."""
    import mibench.engines as engines

    real, cache = engines.load_engine, {}

    def cached(name, model="embedded:tiny", dtype="float32", tp=1):
        key = (name, model, dtype, tp)
        if key not in cache:
            cache[key] = real(name, model=model, dtype=dtype, tp=tp)
        return cache[key]

    engines.load_engine = cached
    yield
    engines.load_engine = real


Q, I = ["--query-ids", "1,2,3"], ["--item-ids", "4,5"]
SCORE_FLAGS = [
    # id lists that are not id lists are errors naming the flag, never text
    (["--query-ids", "1,2,3,", *I], ["--query-ids", "empty id at position 3",
                                      "--query-text"]),
    (["--query-ids", "1,,2", *I], ["--query-ids", "empty id at position 1"]),
    (["--query-ids", ",1", *I], ["--query-ids", "position 0"]),
    (["--query-ids", "1.5,2", *I], ["--query-ids", "'1.5' (position 0) is not a token id"]),
    (["--query-ids", "1,2.0", *I], ["--query-ids", "'2.0' (position 1)"]),
    (["--query-ids", "abc", *I], ["--query-ids", "'abc'"]),
    (["--query-ids", "1 2 3", *I], ["--query-ids", "'1 2 3'"]),
    (["--query-ids", "-1", *I], ["--query-ids", "'-1'"]),
    (["--query-ids", "1e3", *I], ["--query-ids", "'1e3'"]),
    (["--query-ids", "0x10", *I], ["--query-ids", "'0x10'"]),
    (["--query-ids", "\uff11,\uff12", *I], ["--query-ids", "not a token id"]),
    (["--query-ids", "[1,2", *I], ["--query-ids", "'[1'"]),
    (["--query-ids", "1" * 40, *I], ["--query-ids", "not a token id"]),
    (["--query-ids", "", *I], ["--query-ids", "is empty"]),
    (["--query-ids", "[]", *I], ["--query-ids", "is empty"]),
    ([*Q, "--item-ids", "4,"], ["--item-ids", "empty id", "--item-text"]),
    ([*Q, "--item-ids", "4", "--item-ids", "x"], ["--item-ids", "'x'"]),
    ([*Q, "--item-ids", ""], ["--item-ids", "is empty"]),
    ([*Q, *I, "--labels", "198,"], ["--labels", "empty id"]),
    ([*Q, *I, "--labels", "yes"], ["--labels", "'yes'"]),
    ([*Q, *I, "--labels", ""], ["--labels", "is empty"]),
    # one source each: ids or text, never both, never mixed
    ([*Q, "--query-text", "hi", *I], ["--query-text", "not both"]),
    (I, ["--query-ids", "missing"]),
    (Q, ["--item-ids", "missing"]),
    ([*Q, *I, "--item-text", "x"], ["--item-text", "not mixed"]),
    (["--query-text", "", *I], ["--query-text", "is empty"]),
    ([*Q, "--item-text", "a", "--item-text", ""], ["--item-text", "item 1 is empty"]),
    # bytes of argv that are not UTF-8 reach Python as lone surrogates (surrogateescape)
    (["--query-text", "ab\udcffc", *I], ["--query-text", "is not UTF-8 text: byte 0xff at "
                                                         "character 2"]),
    ([*Q, "--item-text", "a", "--item-text", "\udcc3("], ["--item-text", "item 1 is not "
                                                           "UTF-8 text: byte 0xc3"]),
    (["--request", "{W}/good.json", *Q], ["--request", "not both"]),
    (["--request", "{W}/good.json", "--item-text", "x"], ["--request", "not both"]),
    # options, engine, mode, model: checked before any weights load
    ([*Q, *I, "--option", "mask"], ["--option", "key=value"]),
    ([*Q, *I, "--option", "=dense"], ["--option", "key=value"]),
    ([*Q, *I, "--option", "mask=dense"], ["--option", "does not take", "mask"]),
    ([*Q, *I, "--mode", "chunked", "--option", "chunk_size=0"], ["--option", "chunk_size"]),
    ([*Q, *I, "--mode", "chunked", "--option", "chunk_size=true"], ["--option", "chunk_size"]),
    ([*Q, *I, "--option", "bogus=1"], ["--option", "bogus"]),
    ([*Q, *I, "--option", "attention=[1"], ["--option attention", "invalid YAML"]),
    ([*Q, *I, "--mode", "prefill_extend", "--option", "extend_batch_size=8", "--option",
      "precompile_bs=[1,2]"], ["precompile_bs", "cannot hold"]),
    ([*Q, *I, "--mode", "warp"], ["--mode", "unknown mode 'warp'"]),
    ([*Q, *I, "--engine", "tpu"], ["--engine", "unknown engine 'tpu'"]),
    ([*Q, *I, "--engine", "torch", "--mode", "packed"], ["--mode", "unknown mode 'packed'"]),
    ([*Q, *I, "--model", "embedded:nope"], ["model", "unknown preset 'nope'"]),
    ([*Q, *I, "--model", "{W}/missing"], ["model", "no such checkpoint folder"]),
    ([*Q, *I, "--model", "{W}/list-json"], ["config.json", "must be a JSON object"]),
    ([*Q, *I, "--dtype", "fp8"], ["dtype", "unknown dtype 'fp8'"]),
    ([*Q, *I, "--tp", "0"], ["tp", "positive integer"]),
    # Click's own usage errors: one line too
    ([*Q, *I, "--tp", "abc"], ["'--tp'", "valid integer"]),
    ([*Q, *I, "--delimiter", "x"], ["'--delimiter'"]),
    ([*Q, *I, "--softmax=3"], ["'--softmax'", "does not take a value"]),
    (["--query", "1,2", "--item", "3"], ["No such option: --query"]),
    ([*Q, *I, "--bogus"], ["No such option: --bogus"]),
    ([*Q, "--item-ids"], ["'--item-ids' requires an argument"]),
    # found by the engine (loaded once for the table)
    ([*Q, *I, "--labels", "999999999"], ["label_token_ids", "outside the vocabulary"]),
    ([*Q, *I, "--delimiter", "151936"], ["delimiter", "outside the vocabulary"]),
    ([*Q, *I, "--delimiter", "2"], ["query", "delimiter 2 occurs in the query"]),
    ([*Q, "--item-ids", "7,8", "--delimiter", "8"], ["items[0]", "delimiter 8"]),
    (["--query-ids", "151936", *I], ["query", "outside the vocabulary"]),
    ([*Q, *I, "--mode", "packed"], ["delimiter", "needs a delimiter"]),
    ([*Q, *I, "--option", "attention=nope"], ["--option", "attention"]),
    ([*Q, *I, "--tp", "64"], ["tp"]),
    # a request that would not fit this machine
    (["--request", "{W}/big.json", "--mode", "packed", "--option", "mask=dense",
      "--delimiter", str(DELIM)], ["--mode", "host memory", "dense mask"]),
]


@pytest.mark.parametrize("args,needles", SCORE_FLAGS)
def test_bad_score_flags(world, one_engine, args, needles):
    args = [a.replace("{W}", str(world)) for a in args]
    one_line_error(invoke("score", *args), *needles)


REQUEST_FILES = [
    ("missing", ["--request", "no such file"]),
    ("folder", ["--request", "is a folder"]),
    ("binary", ["--request", "not JSON"]),
    ("", ["--request", "not JSON"]),
    ("{not json", ["--request", "not JSON"]),
    ("[" * 100_000 + "]" * 100_000, ["--request", "not JSON"]),
    ("[1, 2]", ["--request", "expected {", "got a list"]),
    ("null", ["--request", "got null"]),
    ('{"query": {"a": 1}, "items": [[1]]}', ["--request", "query must be a list",
                                             "got an object"]),
    ('{"query": 5, "items": [[1]]}', ["query must be", "got an integer"]),
    ('{"query": [1, 2], "items": [1, 2]}', ["--request", "items[0] must be a list"]),
    ('{"query": [1, 2], "items": "abc"}', ["items must be a non-empty list", "a string is one"]),
    ('{"query": [1, 2], "items": []}', ["items must be a non-empty list"]),
    ('{"query": [1, 2], "items": null}', ["items must be a non-empty list", "got null"]),
    ('{"query": "q", "items": ["yes", [5, 6]]}', ["items mixes text (items[0]) and token ids "
                                                  "(items[1])"]),
    ('{"query": [1], "items": [[2]], "labels": [1]}', ["nothing else", "'labels'"]),
    ('{"items": [[2]]}', ["query is missing"]),
    ('{"query": [], "items": [[2]]}', ["query is an empty list"]),
    ('{"query": "", "items": ["a"]}', ["query is an empty string"]),
    ('{"query": [1], "items": [""]}', ["items[0] is an empty string"]),
    ('{"query": [1], "items": [[2.5]]}', ["items[0]: token 0 is 2.5"]),
    ('{"query": [1], "items": [[false]]}', ["items[0]: token 0 is False"]),
    ('{"query": ["1"], "items": [[2]]}', ["query: token 0 is '1'"]),
    ('{"query": [1], "items": [[999999]]}', ["items[0]", "outside the vocabulary"]),
    ('{"query": "q\\ud800", "items": ["a"]}', ["--request", "query holds a lone surrogate"]),
    ('{"query": "q", "items": ["a", "\\udc80"]}', ["--request", "items[1] holds a lone"]),
]


@pytest.mark.parametrize("content,needles", REQUEST_FILES)
def test_bad_score_request_file(world, tmp_path, one_engine, content, needles):
    path = {"missing": tmp_path / "none.json", "folder": world / "requests",
            "binary": world / "binary.bin"}.get(content)
    if path is None:
        path = tmp_path / "r.json"
        path.write_text(content)
    one_line_error(invoke("score", "--request", path), *needles)


# --- the other commands -----------------------------------------------------------------


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    """Broken copies of a real artifact, by name."""
    folder = tmp_path_factory.mktemp("artifacts")
    good = json.loads(GOOD_ARTIFACT.read_text())

    def case0(d):
        return d["cases"][0]

    def thr(value):
        def edit(d):
            for c in d["cases"]:
                if c["metrics"].get("throughput_items_per_s"):
                    c["metrics"]["throughput_items_per_s"].update(median=value, mean=value,
                                                                  min=value, max=value)
        return edit

    edits = {
        "schema-missing": lambda d: d.pop("schema"),
        "schema-other": lambda d: d.update(schema="mibench.run/5"),
        "cases-dict": lambda d: d.update(cases={"a": 1}),
        "case-no-id": lambda d: case0(d).pop("case_id"),
        "status-weird": lambda d: case0(d).update(status="great"),
        "timed-str": lambda d: case0(d).update(timed_s="fast"),
        "timed-negative": lambda d: case0(d).update(timed_s=[-1.0]),
        "compile-nan": lambda d: case0(d).update(compile_s=float("nan")),
        "throughput-zero": thr(0.0),
        "throughput-negative": thr(-3.0),
        "throughput-nan": thr(float("nan")),
        "throughput-inf": thr(float("inf")),
        "latency-zero": lambda d: case0(d)["metrics"]["latency_per_item_ms"].update(median=0.0),
        "provenance-missing": lambda d: d.pop("provenance"),
        "run-id-int": lambda d: d.update(run_id=7),
        "mfu-str": lambda d: case0(d)["metrics"].update(mfu="high"),
    }
    out = {}
    for name, edit in edits.items():
        data = json.loads(json.dumps(good))
        edit(data)
        out[name] = folder / f"{name}.json"
        out[name].write_text(json.dumps(data))
    raw = {"not-json": "{", "empty": "", "list": "[]", "deep": "[" * 100_000 + "]" * 100_000}
    for name, text in raw.items():
        out[name] = folder / f"{name}.json"
        out[name].write_text(text)
    out["binary"] = folder / "binary.json"
    out["binary"].write_bytes(b"\xff\xfe\x00\x01")
    out["folder"] = folder / "folder.json"
    out["folder"].mkdir()
    out["missing"] = folder / "missing.json"
    return out


ARTIFACTS = [
    ("not-json", "not JSON"), ("empty", "not JSON"), ("list", "schema None"),
    ("deep", "nested too deeply"), ("binary", "cannot read"), ("folder", "is a folder"),
    ("missing", "no such artifact"), ("schema-missing", "schema None"),
    ("schema-other", "'mibench.run/5'"), ("cases-dict", "at cases"),
    ("case-no-id", "cases.0.case_id"), ("status-weird", "cases.0.status"),
    ("timed-str", "cases.0.timed_s"), ("timed-negative", "cases.0.timed_s.0"),
    ("compile-nan", "cases.0.compile_s"),
    ("throughput-zero", "throughput_items_per_s.median: 0.0 is not a measurement"),
    ("throughput-negative", "throughput_items_per_s"),
    ("throughput-nan", "throughput_items_per_s.median is NaN"),
    ("throughput-inf", "throughput_items_per_s.median is Infinity"),
    ("latency-zero", "latency_per_item_ms.median"),
    ("provenance-missing", "provenance"), ("run-id-int", "run_id"), ("mfu-str", "mfu"),
]


@pytest.mark.parametrize("name,needle", ARTIFACTS)
def test_bad_artifact(artifacts, name, needle):
    path = artifacts[name]
    one_line_error(invoke("report", path), str(path), needle)
    one_line_error(invoke("compare", GOOD_ARTIFACT, path), str(path), needle)


COMMANDS = [
    (["validate", "{T}/none.yaml"], ["none.yaml", "no such config file"]),
    (["validate", "{T}"], ["is a folder, not a config file"]),
    (["validate", "/dev/null/x.yaml"], ["x.yaml"]),
    (["validate"], ["Missing argument"]),
    (["run", "{C}", "--out", "{T}/a-file"], ["--out", "a-file is a file, not a folder"]),
    (["run", "{C}", "--out", "{T}/a-file/sub"], ["--out", "a-file is a file, so"]),
    (["run", "{C}", "--out", "/proc/mibench-out"], ["--out", "cannot write in /proc"]),
    (["run", "{C}", "--out", "{T}/r.json"], ["--out", "r.json names a file"]),
    (["run", "{C}", "--coordinator", "garbage"], ["--coordinator", "HOST:PORT", "'garbage'"]),
    (["run", "{C}", "--coordinator", "host:99999", "--num-processes", "2", "--process-id", "0"],
     ["--coordinator", "1..65535"]),
    (["run", "{C}", "--coordinator", "host:-1"], ["--coordinator"]),
    (["run", "{C}", "--coordinator", ":1234"], ["--coordinator"]),
    (["run", "{C}", "--coordinator", "a b:12"], ["--coordinator"]),
    (["run", "{C}", "--coordinator", "host:1234"], ["--num-processes", "positive integer"]),
    (["run", "{C}", "--coordinator", "host:1234", "--num-processes", "2", "--process-id", "2"],
     ["--process-id", "[0, 2)"]),
    (["run", "{C}", "--coordinator", "host:1234", "--num-processes", "0", "--process-id", "0"],
     ["--num-processes"]),
    (["run", "{C}", "--num-processes", "2"], ["--num-processes", "goes with --coordinator"]),
    (["run", "{C}", "--process-id", "1"], ["--process-id", "goes with --coordinator"]),
    (["run", "{C}", "--num-processes", "two"], ["'--num-processes'"]),
    (["run", "{C}", "--resume", "{T}/none.json"], ["none.json", "no such artifact"]),
    (["run", "{C}", "--resume", "{T}"], ["is a folder"]),
    (["run", "{C}", "--resume", "{T}/c.yaml"], ["c.yaml", "not JSON"]),
    (["run", "{C}", "--resume", str(GOOD_ARTIFACT)], ["--resume", "different config"]),
    (["model", "make", "tiny", "--out", "{T}/a-file"], ["--out", "is a file, not a folder"]),
    (["model", "make", "tiny", "--out", "{T}/a-file/m"], ["--out", "a-file is a file, so"]),
    (["model", "make", "nope", "--out", "{T}/m"], ["model", "unknown preset 'nope'"]),
    (["model", "make", "tiny"], ["Missing option '--out'"]),
    (["model", "frobnicate"], ["No such command 'frobnicate'"]),
    (["report", str(GOOD_ARTIFACT), "--threshold", "abc"], ["--threshold", "not a number"]),
    (["report", str(GOOD_ARTIFACT), "--threshold", "150%"], ["--threshold", "between"]),
    (["report", str(GOOD_ARTIFACT), "--out", "{T}/a-file/sub"], ["--out", "a-file is a file"]),
    (["report", str(GOOD_ARTIFACT), "--out", "{T}/a-file/r.md"], ["--out", "a-file is a file"]),
    (["report", str(GOOD_ARTIFACT), "--baseline", "{T}/none.json"], ["none.json"]),
    (["report"], ["Missing argument"]),
    (["compare", str(GOOD_ARTIFACT), str(GOOD_ARTIFACT), "--format", "xml"],
     ["--format", "unknown format 'xml'"]),
    (["compare", str(GOOD_ARTIFACT), str(GOOD_ARTIFACT), "--threshold", "-5%"],
     ["--threshold"]),
    (["compare", str(GOOD_ARTIFACT)], ["NEW", "give BASE and NEW, or neither"]),
    (["history", "{T}/none"], ["none", "not a folder of artifacts"]),
    (["history", "{T}/empty"], ["no *.json artifacts"]),
    (["history", "{T}/broken"], ["bad.json", "not JSON"]),
    (["history", "{T}", "--format", "xml"], ["--format"]),
    (["history", str(ROOT / "tests" / "data"), "--out", "{T}/a-file/h"],
     ["--out", "a-file is a file"]),
    (["env", "--peak=3"], ["'--peak'"]),
    (["nope"], ["No such command 'nope'"]),
    (["--bogus"], ["No such option: --bogus"]),
]


@pytest.mark.parametrize("args,needles", COMMANDS)
def test_bad_command(tmp_path, cfg, args, needles):
    config = cfg()
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "bad.json").write_text("{")
    args = [a.replace("{T}", str(tmp_path)).replace("{C}", str(config)) for a in args]
    one_line_error(invoke(*args), *needles)
    assert not (tmp_path / "m").exists()  # nothing made for a refused command


def test_run_whose_folder_becomes_unwritable(tmp_path, cfg, monkeypatch):
    """The artifact folder turns unwritable after the run started: one line, exit 4 (the
    environment failed mid-run; the input was fine)."""
    import mibench.harness.run.runner as runner_module

    def failing_run(plan):
        out = plan.options.out
        shutil.rmtree(out)
        Path(out).write_text("")  # the folder is gone; a file took its place
        raise PermissionError(13, "Permission denied", str(Path(out) / "run.json"))

    monkeypatch.setattr(runner_module, "run", failing_run)
    result = invoke("run", cfg(), "--out", tmp_path / "out")
    assert result.exit_code == 4, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("error: --out: cannot write under") and "Permission denied" in line
    assert "the run stopped" in line


# --- the Python API -------------------------------------------------------------------

LOAD_ENGINE = [
    ({"name": "onnx"}, "engine"), ({"name": 1}, "engine"), ({"name": None}, "engine"),
    ({"name": "jax", "dtype": "fp8"}, "dtype"), ({"name": "jax", "dtype": None}, "dtype"),
    ({"name": "jax", "tp": 0}, "tp"), ({"name": "jax", "tp": -1}, "tp"),
    ({"name": "jax", "tp": True}, "tp"), ({"name": "jax", "tp": "1"}, "tp"),
    ({"name": "jax", "tp": 1.0}, "tp"), ({"name": "jax", "model": ""}, "model"),
    ({"name": "jax", "model": 5}, "model"), ({"name": "jax", "model": None}, "model"),
    ({"name": "jax", "model": "embedded:nope"}, "model"),
    ({"name": "torch", "model": "embedded:"}, "model"),
    ({"name": "jax", "model": "{W}/missing"}, "model"),
    ({"name": "torch", "model": "{W}/no-config"}, "model"),
]


@pytest.mark.parametrize("kwargs,field", LOAD_ENGINE)
def test_bad_load_engine(world, kwargs, field):
    kwargs = {k: v.replace("{W}", str(world)) if isinstance(v, str) else v
              for k, v in kwargs.items()}
    with pytest.raises(MibenchError) as err:
        load_engine(**kwargs)
    assert err.value.field == field and str(err.value).startswith(f"{field}: ")
    assert "\n" not in str(err.value)


QUERY, ITEMS = [5, 6, 7], [[8, 9], [10]]
SCORE_API = [
    ({"query": []}, "query"), ({"query": None}, "query"), ({"query": 5}, "query"),
    ({"query": {"a": 1}}, "query"), ({"query": b"abc"}, "query"), ({"query": [1.5]}, "query"),
    ({"query": [True]}, "query"), ({"query": [-1]}, "query"), ({"query": [151936]}, "query"),
    ({"query": [[1, 2]]}, "query"), ({"query": np.array([1.5])}, "query"),
    ({"query": np.int64(5)}, "query"), ({"query": ""}, "query"),
    ({"items": []}, "items"), ({"items": None}, "items"), ({"items": "abc"}, "items"),
    ({"items": b"ab"}, "items"), ({"items": {"a": [1]}}, "items"),
    ({"items": [[]]}, "items[0]"), ({"items": [None]}, "items[0]"), ({"items": [5]}, "items[0]"),
    ({"items": [[8], "x"]}, "items"), ({"items": ["x", [8]]}, "items"),
    ({"items": [b"x"]}, "items[0]"), ({"items": [[8], [1.0]]}, "items[1]"),
    ({"items": [[8], [False]]}, "items[1]"), ({"items": [[8], [151936]]}, "items[1]"),
    ({"items": [[8], ""]}, "items"), ({"items": ["a", ""]}, "items[1]"),
    ({"query": "a\ud800b"}, "query"), ({"items": ["x", "y\udfff"]}, "items[1]"),
    ({"label_token_ids": []}, "label_token_ids"), ({"label_token_ids": 198}, "label_token_ids"),
    ({"label_token_ids": "198"}, "label_token_ids"),
    ({"label_token_ids": [True]}, "label_token_ids"),
    ({"label_token_ids": [200000]}, "label_token_ids"),
    ({"label_token_ids": None}, "label_token_ids"),
    ({"label_token_ids": [[198]]}, "label_token_ids"),
    ({"delimiter": "1"}, "delimiter"), ({"delimiter": 1.5}, "delimiter"),
    ({"delimiter": True}, "delimiter"), ({"delimiter": 151936}, "delimiter"),
    ({"delimiter": -1}, "delimiter"), ({"delimiter": 6}, "query"),
    ({"delimiter": 9}, "items[0]"),
    ({"apply_softmax": "no"}, "apply_softmax"), ({"apply_softmax": 1}, "apply_softmax"),
    ({"apply_softmax": None}, "apply_softmax"), ({"apply_softmax": "True"}, "apply_softmax"),
    ({"mode": "fastest"}, "mode"), ({"mode": None}, "mode"), ({"mode": 1}, "mode"),
    ({"mode": "packed"}, "delimiter"),
    ({"mode": "packed", "delimiter": DELIM, "mask": "x"}, "mask"),
    ({"mode": "packed", "delimiter": DELIM, "mask": True}, "mask"),
    ({"mode": "chunked", "delimiter": DELIM, "chunk_size": 0}, "chunk_size"),
    ({"mode": "chunked", "delimiter": DELIM, "chunk_size": True}, "chunk_size"),
    ({"mode": "chunked", "delimiter": DELIM, "chunk_size": "2"}, "chunk_size"),
    ({"mode": "chunked", "delimiter": DELIM, "schedule": "later"}, "schedule"),
    ({"mode": "prefill_extend", "extend_batch_size": 4, "precompile_bs": [2]}, "precompile_bs"),
    ({"mode": "prefill_extend", "precompile_bs": [0]}, "precompile_bs"),
    ({"mode": "prefill_extend", "precompile_bs": "12"}, "precompile_bs"),
    ({"mode": "prefill_extend", "extend_batch_size": 2.0}, "extend_batch_size"),
    ({"mode": "single", "attention": "pallas2"}, "attention"),
    ({"mode": "single", "mask": "dense"}, "mask"), ({"mode": "single", "bogus": 1}, "bogus"),
    ({"query": [1] * 40960, "delimiter": DELIM}, "items[0]"),
]


@pytest.mark.parametrize("kwargs,field", SCORE_API)
def test_bad_score_call(jax_tiny, kwargs, field):
    args = {"query": QUERY, "items": ITEMS, "label_token_ids": LABELS} | kwargs
    with pytest.raises(MibenchError) as err:
        jax_tiny.score(**args)
    assert err.value.field == field, str(err.value)
    assert str(err.value).startswith(f"{field}: ") and "\n" not in str(err.value)


def test_the_tables_cover_150_bad_inputs():
    tables = (CONFIGS, SETS, JSONL, SCORE_FLAGS, REQUEST_FILES, ARTIFACTS, COMMANDS,
              LOAD_ENGINE, SCORE_API)
    assert sum(map(len, tables)) + 2 >= 150  # + the binary config and the unwritable run


# --- real processes: nothing but one line reaches stderr ------------------------------


def mibench(*args, cwd=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


@pytest.mark.parametrize("args,needle", [
    (["validate", "BOMB"], "expands to more than 100000 values"),
    (["score", "--query-ids", "1,,2", "--item-ids", "3"], "--query-ids"),
    (["report", "ZERO"], "throughput_items_per_s.median"),
    (["run", "CONFIG", "--out", "FILE"], "--out"),
    (["score", "--query", "1,2"], "No such option: --query"),
    # a byte that is not UTF-8 on the command line (subprocess writes U+DCFF as byte 0xff)
    (["score", "--query-text", "ab\udcffc", "--item-text", "x"],
     "--query-text: is not UTF-8 text: byte 0xff at character 2"),
])
@pytest.mark.slow
def test_no_traceback_reaches_stderr(tmp_path, cfg, artifacts, args, needle):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(_alias_bomb())
    (tmp_path / "file").write_text("x")
    names = {"BOMB": bomb, "ZERO": artifacts["throughput-zero"], "CONFIG": cfg(),
             "FILE": tmp_path / "file"}
    out = mibench(*[names.get(a, a) for a in args])
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr

"""Every kind of config error: exit 2 from `mibench validate`, one line naming the key path,
the file and the line."""

from __future__ import annotations

import textwrap

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.spec import ConfigError

BASE = """\
name: t
model: {path: "embedded:tiny"}
workload:
  query_tokens: 8
  num_items: 4
  item_tokens: 2
  label_token_ids: [198]
  delimiter: 151643
runs: {warmup: 0, timed: 1}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed, mask: [dense, segment]}
"""


def write(tmp_path, text, name="c.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def validate(path, *sets):
    args = ["validate", str(path)] + [a for s in sets for a in ("--set", s)]
    return CliRunner().invoke(app, args)


def assert_error(result, *needles):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def test_base_config_is_valid(tmp_path):
    result = validate(write(tmp_path, BASE))
    assert result.exit_code == 0, result.output
    assert "jax/packed/mask=segment/tp=1" in result.output


@pytest.mark.parametrize("text,needles", [
    (BASE.replace("  num_items: 4", "  num_items: 4\n  colour: red"),
     ["workload.colour", "unknown key", "c.yaml:6", "allowed: query_tokens"]),
    (BASE + "extra_top: 1\n", ["extra_top", "unknown key", "c.yaml:13"]),
    (BASE.replace("mask: [dense, segment]", "mask: [dense, segment], colour: 1"),
     ["cases.1.colour", "unknown key", "c.yaml:12"]),
    (BASE.replace("num_items: 4", "num_items: four"), ["workload.num_items", "integer",
                                                       "c.yaml:5"]),
    (BASE.replace("timed: 1", "timed: 0"), ["runs.timed", "greater than 0"]),
    (BASE.replace('model: {path: "embedded:tiny"}', 'model: {path: "embedded:tiny", '
                  'dtype: float16}'), ["model.dtype", "float32"]),
    (BASE.replace("mask: [dense, segment]", "mask: []"), ["cases.1.mask", "empty"]),
    (BASE.replace("num_items: 4", "num_items: []"), ["workload.num_items", "empty"]),
    (BASE.split("cases:")[0] + "cases: []\n", ["cases", "empty"]),
    (BASE.replace("engine: jax, mode: single", "engine: tpu, mode: single"),
     ["cases.0.engine", "unknown engine 'tpu'", "c.yaml:11"]),
    (BASE.replace("engine: jax, mode: single", "engine: jax, mode: warp"),
     ["cases.0.mode", "unknown mode 'warp'", "c.yaml:11"]),
    (BASE.replace("engine: jax, mode: single", "engine: torch, mode: packed"),
     ["cases.0.mode", "unknown mode 'packed' for engine torch"]),
    (BASE.replace("engine: jax, mode: single", "engine: jax, mode: single, chunk_size: 4"),
     ["cases.0.chunk_size", "takes no option"]),
    (BASE.replace("  label_token_ids: [198]\n", ""), ["workload", "label_token_ids"]),
    (BASE.replace("item_tokens: 2", "item_tokens: {dist: uniform, min: 9, max: 3}"),
     ["workload.item_tokens", "min 9 is greater than max 3"]),
    (BASE.replace("num_items: 4", "num_items: 4\n  num_items: 5"),
     ["workload.num_items", "duplicate key", "c.yaml:6"]),
    (BASE.replace("name: t", "name: [t"), ["invalid YAML", "c.yaml"]),
    (BASE + "  - {engine: jax, mode: single}\n", ["cases.2", "repeats cases.0"]),
    (BASE + "parity: {reference: {engine: torch, mode: packed}}\n",
     ["parity.reference.mode", "unknown mode 'packed'", "c.yaml:13"]),
    (BASE + "parity: {checks: [isolation, speed]}\n", ["parity.checks.1", "isolation"]),
])
def test_config_error(tmp_path, text, needles):
    assert_error(validate(write(tmp_path, text)), *needles)


def test_bad_include_missing_file(tmp_path):
    path = write(tmp_path, "include: nowhere.yaml\nname: x\n")
    assert_error(validate(path), "include", "c.yaml:1", "nowhere.yaml not found")


def test_bad_include_cycle(tmp_path):
    write(tmp_path, "include: b.yaml\n", "a.yaml")
    write(tmp_path, "include: a.yaml\n", "b.yaml")
    assert_error(validate(tmp_path / "a.yaml"), "include", "cycle")


def test_error_in_included_file_names_that_file(tmp_path):
    write(tmp_path, BASE.replace("num_items: 4", "num_items: -1"), "base.yaml")
    path = write(tmp_path, "include: base.yaml\nname: child\n")
    assert_error(validate(path), "base.yaml:5", "workload.num_items")


def test_set_errors_name_the_override(tmp_path):
    path = write(tmp_path, BASE)
    assert_error(validate(path, "workload.bogus=1"), "--set workload.bogus=1",
                 "workload.bogus", "unknown key")
    assert_error(validate(path, "workload.num_items"), "--set", "KEY=VALUE")
    assert_error(validate(path, "cases.7.mode=single"), "cases.7", "no such list element")


def test_missing_config_file(tmp_path):
    assert_error(validate(tmp_path / "none.yaml"), "none.yaml", "no such config file")


def test_config_error_is_a_mibench_error(tmp_path):
    from mibench.engines import MibenchError

    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, BASE.replace("timed: 1", "timed: x")))
    assert isinstance(e.value, MibenchError)
    assert e.value.key == "runs.timed" and e.value.line == 9


def test_numbers_in_exponent_form_are_numbers_everywhere(tmp_path):
    """`1e9` is a number (YAML 1.2, JSON), not the string YAML 1.1 reads: in a file, in a
    `--set` and in a quoted string still a string (issue 45: `p50_ms: 1e9` was refused as
    not a number, while `1.0e+9` passed)."""
    from mibench.harness.config.yamlsource import load_yaml

    assert load_yaml("a: 1e9\nb: -2E-3\nc: .5e2\nd: '1e9'\ne: 1e\nf: 0x1F", "x")[0] == \
        {"a": 1e9, "b": -2e-3, "c": 50.0, "d": "1e9", "e": "1e", "f": 31}
    slo = BASE.replace("  - {engine: jax, mode: packed, mask: [dense, segment]}\n",
                       "  - {engine: http, base_url: 'http://127.0.0.1:9', slo: {p50_ms: 1e9}}\n")
    config = load_config(write(tmp_path, slo))
    assert config.cases[1].slo.p50_ms == 1e9
    config = load_config(write(tmp_path, slo), ["cases.1.slo.p50_ms=5e2"])
    assert config.cases[1].slo.p50_ms == 500.0
    # an integer key keeps refusing a float, written either way
    assert_error(validate(write(tmp_path, BASE), "workload.num_items=4e0"),
                 "workload.num_items", "integer")


IDLE = BASE + """\
  - engine: http
    base_url: "http://127.0.0.1:9"
    clients: 1
    concurrency: {trials: 3}
    runs: {timed: 4}
parity:
  reference: {engine: torch}
  checks: [modes, topologies]
  min_speedup: 2
"""


@pytest.mark.parametrize("key,why", [
    ("c.yaml:16: cases.2.concurrency", "parity.checks has no `concurrency`"),
    ("c.yaml:17: cases.2.runs.timed", "an http case's load is one timed run"),
    ("c.yaml:20: parity.checks", "`topologies` does nothing"),
    ("c.yaml:19: parity.reference", "only the `engines` check reads the reference"),
    ("c.yaml:21: parity.min_speedup", "parity.checks has no `speedup`"),
])
def test_validate_names_every_key_that_would_do_nothing(tmp_path, key, why):
    """Issue 45: `concurrency: {trials: 3}` without the `concurrency` check did nothing and
    said nothing. Each such key is a note naming its file, line and key; still exit 0 (a
    report's `--set parity.checks=[]` reproduce command must load its config)."""
    out = validate(write(tmp_path, IDLE))
    assert out.exit_code == 0, out.output
    notes = [line for line in out.output.splitlines() if "does nothing" in line]
    assert any(key in line and why in line for line in notes), notes
    assert len(notes) == 5, notes
    quiet = IDLE.replace("checks: [modes, topologies]", "checks: [modes, engines, speedup, "
                         "concurrency]").replace("    runs: {timed: 4}\n", "")
    out = validate(write(tmp_path, quiet))
    assert out.exit_code == 0 and "does nothing" not in out.output, out.output


def test_tokens_beside_a_requests_file_and_a_lone_concurrency_check_are_named(tmp_path):
    (tmp_path / "r.jsonl").write_text('{"query": [1, 2], "items": [[3]]}\n')
    text = BASE.replace("  query_tokens: 8\n  num_items: 4\n  item_tokens: 2\n",
                        "  requests: r.jsonl\n  tokens: constant\n") + \
        "parity: {checks: [concurrency]}\n"
    out = validate(write(tmp_path, text))
    assert out.exit_code == 0, out.output
    assert "c.yaml:5: workload.tokens: does nothing: the requests come from" in out.output, \
        out.output
    assert "parity.checks: `concurrency` does nothing: it checks the servers of http " \
        "cases" in out.output

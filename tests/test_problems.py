"""The one validation pass (harness/config/problems.py): every rule run once, found as
`Problem`s without raising; the mode rules and the memory check are the registry's; an
unknown engine or mode is refused in one place; errors are re-keyed, never re-worded."""

from __future__ import annotations

import textwrap

import pytest

from mibench.engines import MODES, InputError, MibenchError, Shape, engine_mode, engine_modes
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.config.problems import (
    Problem,
    case_problems,
    config_problems,
    problems,
)
from mibench.harness.config.spec import ConfigError

HEAD = """\
name: t
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 1}
"""


def loaded(tmp_path, cases: str):
    """A config past pydantic only (load_config's later passes patched out), and its file."""
    import mibench.harness.config.load as load

    path = tmp_path / "c.yaml"
    path.write_text(HEAD + textwrap.dedent(cases))
    saved = load.config_problems, load.case_problems
    load.config_problems = load.case_problems = lambda *a, **k: []
    try:
        return load_config(path), path
    finally:
        load.config_problems, load.case_problems = saved


def test_config_problems_finds_every_bad_case_without_raising(tmp_path):
    config, _ = loaded(tmp_path, """\
        cases:
          - {engine: tpu, mode: single}
          - {engine: jax, mode: warp}
          - {engine: jax, mode: single, chunk_size: 4}
          - {engine: jax, mode: single, clients: 2}
        parity: {reference: {engine: torch, mode: packed}}
        """)
    found = config_problems(config)
    assert [p.key for p in found] == [("cases", 0, "engine"), ("cases", 1, "mode"),
                                      ("cases", 2, "chunk_size"), ("cases", 3, "clients"),
                                      ("parity", "reference", "mode")]
    assert found[0].message.startswith("unknown engine 'tpu' (known: jax, torch, http)")
    assert found[1].message.startswith("unknown mode 'warp' for engine jax (known: ")
    assert found[4].message.startswith("unknown mode 'packed' for engine torch")


def test_topologies_is_refused_for_a_server_at_tp_above_1(tmp_path):
    """An http case expands over topology.tp like any case, but its server is not sharded
    by it: the topologies check would compare the server with itself."""
    http = "  - {engine: http, mode: single, base_url: 'http://127.0.0.1:9', clients: 1}\n"
    config, _ = loaded(tmp_path, "topology: {tp: [1, 2]}\ncases:\n" + http
                       + "parity: {checks: [topologies]}\n")
    found = config_problems(config)
    assert [p.key for p in found] == [("parity", "checks")]
    assert "cases.0 is http" in found[0].message
    for fine in ("topology: {tp: [1, 2]}\ncases:\n" + http + "parity: {checks: [modes]}\n",
                 "topology: {tp: [1]}\ncases:\n" + http + "parity: {checks: [topologies]}\n",
                 "topology: {tp: [1, 2]}\ncases:\n  - {engine: jax, mode: single}\n"
                 "parity: {checks: [topologies]}\n"):
        assert config_problems(loaded(tmp_path, fine)[0]) == [], fine


def test_case_problems_run_the_mode_rules_once_and_the_first_is_raised(tmp_path):
    config, path = loaded(tmp_path, """\
        cases:
          - {engine: jax, mode: prefill_extend, extend_batch_size: 8, precompile_bs: [1, 2]}
          - {engine: jax, mode: packed, workload: {delimiter: null}}
        """)
    assert config_problems(config) == []
    found = case_problems(config, expand(config), memory=(None, "unknown"))
    assert found == [
        Problem(("cases", 0, "precompile_bs"), "[1, 2] cannot hold extend_batch_size=8: its "
                "largest size must be >= 8"),
        Problem(("cases", 1, "workload", "delimiter"), found[1].message)]
    assert "packs items into one sequence" in found[1].message
    assert found[1].message.endswith("(cases.1)")
    assert problems(config, expand(config)) == found
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value) == f"{path}:7: cases.0.precompile_bs: {found[0].message}"


def test_case_problems_memory_names_the_workload_size(tmp_path):
    config, _ = loaded(tmp_path, """\
        cases:
          - {engine: jax, mode: single}
        """)
    tiny = (1024, "RAM (MemTotal)")  # 1 KiB: no case fits
    (found,) = case_problems(config, expand(config), memory=tiny)
    assert found.key == ("workload", "num_items")
    assert found.message.startswith("case jax/single/tp=1 needs at least ")
    assert found.message.endswith("more than this machine's 1.0 KiB of RAM (MemTotal)")
    assert case_problems(config, expand(config), memory=(1024**3, "RAM")) == []


def test_mode_problems_list_semantics_then_options_and_check_raises_the_first():
    mode = MODES["jax"]["prefill_extend"]
    found = mode.problems({"extend_batch_size": 8, "precompile_bs": [4]}, "delimited", None)
    assert [e.field for e in found] == ["semantics", "precompile_bs"]
    with pytest.raises(MibenchError, match="precompile_bs: \\[4\\] cannot hold"):
        mode.check({"extend_batch_size": 8, "precompile_bs": [4]})
    assert mode.check({"extend_batch_size": 4, "precompile_bs": [4]})["precompile_bs"] == [4]
    with pytest.raises(MibenchError, match="^semantics: delimited semantics"):
        mode.check_semantics("delimited", None)
    assert MODES["jax"]["packed"].problems({"mask": "nope", "chunk_size": 2}, None, 7)[0] \
        .field == "chunk_size"  # an option the mode does not take, reported alone


def test_memory_fit_is_host_bytes_and_extra_against_the_limit():
    mode = MODES["jax"]["packed"]
    shape = Shape(9, 4, 2.0, longest=2)
    parts, fits = mode.memory_fit(shape, {}, 1e12, {"bodies": 5.0})
    assert parts == {**mode.host_bytes(shape, {}), "bodies": 5.0} and fits
    assert mode.memory_fit(shape, {}, sum(parts.values()) - 1, {"bodies": 5.0}) == \
        (parts, False)
    assert mode.memory_fit(None, {}, 4, {"token lists": 5.0}) == ({"token lists": 5.0}, False)


def test_engine_mode_is_the_one_unknown_engine_or_mode_error():
    assert engine_mode("jax", "packed") is MODES["jax"]["packed"]
    assert engine_modes("torch") is MODES["torch"]
    with pytest.raises(MibenchError) as e:
        engine_mode("tpu", "single")
    assert (e.value.field, e.value.message) == ("engine", "unknown engine 'tpu' (known: jax, "
                                                "torch, http)")
    with pytest.raises(MibenchError) as e:
        engine_mode("http", None)
    assert e.value.field == "mode" and e.value.message.startswith("unknown mode None for "
                                                                  "engine http (known: single")
    with pytest.raises(MibenchError, match="^engine: unknown engine 7"):
        engine_modes(7)


def test_an_error_is_rekeyed_not_reworded():
    e = InputError("must be one of delimited, plain, got 'x'", field="semantics")
    moved = e.under("--semantics")
    assert type(moved) is InputError and moved.field == "--semantics"
    assert str(moved) == "--semantics: must be one of delimited, plain, got 'x'"
    assert moved.message == e.message
    assert type(e.under("q", MibenchError)) is MibenchError
    plain = MibenchError("no field")
    assert plain.message == str(plain) == "no field"

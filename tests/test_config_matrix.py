"""Matrix expansion, includes, --set overrides and the shipped configs."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.testing import write_config

CONFIGS = sorted((Path(__file__).parent.parent / "configs").glob("*.yaml"))


def ids(config):
    return [c.case_id for c in expand(config)]


def test_matrix_expands_to_expected_ids(tmp_path):
    path = write_config(tmp_path, """
        name: m
        model: {path: "embedded:tiny"}
        topology: {tp: [1, 4]}
        workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1],
                   delimiter: 9}
        cases:
          - {engine: jax, mode: single}
          - {engine: jax, mode: packed, mask: [dense, segment]}
          - {engine: jax, mode: chunked, chunk_size: [32, 64]}
          - {engine: jax, mode: prefill_extend, extend_batch_size: [8, 12],
             precompile_bs: [1, 2, 4, 8, 12]}
          - {engine: torch, mode: single}
        """)
    expected = ["jax/single", "jax/packed/mask=dense", "jax/packed/mask=segment",
                "jax/chunked/chunk_size=32", "jax/chunked/chunk_size=64",
                "jax/prefill_extend/extend_batch_size=8/precompile_bs=1,2,4,8,12",
                "jax/prefill_extend/extend_batch_size=12/precompile_bs=1,2,4,8,12",
                "torch/single"]
    assert ids(load_config(path)) == [f"{e}/tp={tp}" for tp in (1, 4) for e in expected]


def test_model_dtype_and_workload_axes_appear_in_ids(tmp_path):
    path = write_config(tmp_path, """
        name: m
        model: {path: ["embedded:qwen3-0.6b", "embedded:qwen3-1.7b"], dtype: [float32, bfloat16]}
        workload: {query_tokens: 8, num_items: [1, 8], item_tokens: 2, label_token_ids: [1]}
        cases:
          - {engine: jax, mode: prefill_extend, extend_batch_size: 4, precompile_bs: [1, 2, 3, 4]}
        """)
    got = ids(load_config(path))
    assert len(got) == 8
    head = "jax/prefill_extend/extend_batch_size=4/precompile_bs=1-4/tp=1"
    assert got[0] == f"{head}/model=qwen3-0.6b/dtype=float32/items=1"
    assert got[-1] == f"{head}/model=qwen3-1.7b/dtype=bfloat16/items=8"


def test_precompile_bs_list_of_lists_is_an_axis(tmp_path):
    path = write_config(tmp_path, """
        name: m
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1]}
        cases:
          - {engine: jax, mode: prefill_extend, extend_batch_size: 2,
             precompile_bs: [[1, 2], [4, 8]]}
        """)
    specs = expand(load_config(path))
    assert [c.params["precompile_bs"] for c in specs] == [[1, 2], [4, 8]]


def test_case_workload_patch_and_runs_override(tmp_path):
    path = write_config(tmp_path, """
        name: m
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 4, item_tokens: {dist: uniform, min: 2, max: 5},
                   label_token_ids: [1]}
        runs: {warmup: 2, timed: 7}
        cases:
          - {engine: jax, mode: single, runs: {timed: 1, timeout_s: 30}}
          - {engine: jax, mode: single, workload: {num_items: 9, apply_softmax: true}}
        """)
    a, b = expand(load_config(path))
    assert (a.runs.warmup, a.runs.timed, a.runs.timeout_s) == (2, 1, 30)
    assert (b.runs.warmup, b.runs.timed) == (2, 7)
    assert b.case_id == "jax/single/tp=1/items=9/apply_softmax=true"
    assert b.workload.num_items == 9
    assert (b.workload.item_tokens.min, b.workload.item_tokens.max) == (2, 5)
    assert b.workload.apply_softmax and not a.workload.apply_softmax


def test_include_deep_merges_and_set_overrides(tmp_path):
    write_config(tmp_path, """
        name: base
        model: {path: "embedded:tiny", dtype: bfloat16}
        workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1],
                   delimiter: 151643}
        cases: [{engine: jax, mode: single}]
        """, name="base.yaml")
    path = write_config(tmp_path, """
        include: base.yaml
        name: child
        workload: {num_items: 16}
        """)
    config = load_config(path, ["workload.seed=7", "cases.0.mode=packed",
                                "model.path=embedded:small"])
    assert config.name == "child" and config.model.dtype == ["bfloat16"]
    assert config.model.path == ["embedded:small"]
    assert config.workload.num_items == [16] and config.workload.query_tokens == [8]
    assert config.workload.seed == 7 and config.cases[0].mode == "packed"
    # the resolved config records the overrides, so its sha256 changes with them
    assert load_config(path).sha256() != config.sha256()
    assert load_config(path).sha256() == load_config(path).sha256()


def test_requests_path_is_relative_to_the_config(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "reqs.jsonl").write_text('{"query": [1, 2], "items": [[3]]}\n')
    path = write_config(tmp_path / "sub", """
        name: r
        model: {path: "embedded:tiny"}
        workload: {requests: reqs.jsonl, label_token_ids: [1]}
        cases: [{engine: jax, mode: single}]
        """)
    (spec,) = expand(load_config(path))
    assert spec.workload.requests == str((tmp_path / "sub" / "reqs.jsonl").resolve())


@pytest.mark.parametrize("path", CONFIGS, ids=[p.name for p in CONFIGS])
def test_shipped_config_validates(path):
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert f"{load_config(path).name}: " in result.output


def test_shipped_configs_are_all_there():
    names = {p.stem for p in CONFIGS}
    assert {"cpu-smoke", "cpu", "v6e1", "v6e4", "v6e8", "gpu", "model-matrix"} <= names


def test_cpu_smoke_covers_every_mode_and_check():
    config = load_config(Path(__file__).parent.parent / "configs" / "cpu-smoke.yaml")
    got = ids(config)
    for needle in ("jax/single", "mask=dense", "mask=segment", "jax/chunked",
                   "jax/prefill_extend", "torch/single"):
        assert any(needle in i for i in got), needle
    assert set(config.parity.checks) == {"isolation", "modes", "engines", "order", "duplicates",
                                         "degenerate"}


def test_include_list_merges_in_order_and_locates_keys(tmp_path):
    write_config(tmp_path, """
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1]}
        """, name="a.yaml")
    write_config(tmp_path, """
        workload: {num_items: 6}
        runs: {timed: 9}
        """, name="b.yaml")
    path = write_config(tmp_path, """
        include: [a.yaml, b.yaml]
        name: both
        cases: [{engine: jax, mode: single}]
        """)
    config = load_config(path)
    assert config.workload.num_items == [6] and config.workload.query_tokens == [8]
    assert config.runs.timed == 9
    assert config.error(("workload", "num_items"), "x").file.endswith("b.yaml")
    nearest = config.error(("workload", "seed"), "x")  # unset: its nearest located parent
    assert nearest.file.endswith("b.yaml") and nearest.line == 1
    err = config.error(("cases", 0, "mode"), "x")
    assert err.file.endswith("c.yaml") and err.line == 3


def test_attention_and_schedule_are_axes_and_defaults_stay_out_of_ids(tmp_path):
    path = write_config(tmp_path, """
        name: m
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1],
                   delimiter: 9}
        cases:
          - {engine: jax, mode: prefill_extend, attention: [auto, xla, cudnn]}
          - {engine: jax, mode: chunked, schedule: [parallel, sequential]}
        """)
    config = load_config(path)
    assert ids(config) == ["jax/prefill_extend/tp=1", "jax/prefill_extend/attention=xla/tp=1",
                           "jax/prefill_extend/attention=cudnn/tp=1", "jax/chunked/tp=1",
                           "jax/chunked/schedule=sequential/tp=1"]
    assert [c.params for c in expand(config)][:2] == [{"attention": "auto"},
                                                      {"attention": "xla"}]


@pytest.mark.parametrize("line,key", [
    ("{engine: jax, mode: packed, attention: flash}", "attention"),
    ("{engine: jax, mode: chunked, schedule: later}", "schedule"),
    ("{engine: torch, mode: single, attention: xla}", "attention"),
    ("{engine: jax, mode: packed, schedule: sequential}", "schedule")])
def test_bad_attention_or_schedule_names_the_key(tmp_path, line, key):
    from mibench.harness.config.spec import ConfigError

    path = write_config(tmp_path, f"""
        name: m
        model: {{path: "embedded:tiny"}}
        workload: {{query_tokens: 8, num_items: 4, item_tokens: 2, label_token_ids: [1],
                   delimiter: 9}}
        cases:
          - {line}
        """)
    with pytest.raises(ConfigError, match=f"cases.0.{key}"):
        load_config(path)


def test_seeds_config_is_constant_but_its_parity_workload_is_random():
    from mibench.harness.run.parity import parity_workload

    config = load_config(Path(__file__).parent.parent / "configs" / "v6e1-seeds.yaml")
    assert {c.workload.tokens for c in expand(config)} == {"constant"}
    assert not any("chunked" in i for i in ids(config))  # no seed runs chunks at TP 1
    assert "jax/prefill_extend/mask=dense/extend_batch_size=12/precompile_bs=1-12/tp=1" \
        in ids(config)  # seed 000: MULTI_ITEM_MASK_IMPL=dense for prefill+extend too
    spec = parity_workload(config)
    assert spec.tokens == "random" and spec.query_tokens == 512 and spec.num_items == 16


def test_case_options_are_the_registry():
    """A config case takes exactly the options the mode registry declares."""
    from mibench.engines import MODES, OPTIONS
    from mibench.harness.config.spec import HTTP_FIELDS, Case

    declared = {o for modes in MODES.values() for mode in modes.values() for o in mode.options}
    assert list(Case.model_fields) == ["engine", "mode", *OPTIONS, "runs", "workload",
                                       *HTTP_FIELDS]  # and an http case's keys
    assert set(OPTIONS) == declared
    for name, option in OPTIONS.items():  # each field's type is the option's kind
        assert Case.model_fields[name].description == option.doc


def test_validate_lists_each_case_with_the_registry_defaults(tmp_path, monkeypatch):
    """`mibench validate` fills every option the mode runs with from the registry."""
    import dataclasses

    from mibench.engines import MODES
    from mibench.harness.config.matrix import expand
    from mibench.harness.report.console import render_cases

    config = load_config(write_config(tmp_path, """
        name: v
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [5],
                   delimiter: 151643}
        cases: [{engine: jax, mode: chunked, chunk_size: 4}]
        """))
    out = render_cases(config, expand(config))
    assert "chunk_size=4 mask=segment schedule=parallel attention=auto" in out
    chunked = MODES["jax"]["chunked"]
    moved = dataclasses.replace(chunked, defaults={**chunked.defaults, "mask": "dense"})
    with MODES["jax"].entry("chunked", moved):  # the registry is the one source
        assert "chunk_size=4 mask=dense schedule=parallel" in render_cases(config, expand(config))


def test_v6e1_sglang_jax_launches_the_seeds_serving_flags():
    """The seeds' engine family on a TPU VM: sglang-jax on one TPU chip, at most 12 running
    requests, paddings 1..12, the seeds' shape, parity against torch and concurrency; the
    case is skipped where MIBENCH_SGLANG_JAX is not set."""
    config = load_config(Path(__file__).parent.parent / "configs" / "v6e1-sglang-jax.yaml")
    (spec,) = expand(config)
    command = spec.http.launch.command
    assert command[command.index("--device") + 1] == "tpu"
    assert command[command.index("--tp-size") + 1] == "1"
    pads = list(command[command.index("--precompile-bs-paddings") + 1:][:12])
    assert pads == [str(i) for i in range(1, 13)]
    assert dict(spec.http.launch.args) == {"max_running_requests": 12}
    w = spec.workload
    assert (w.query_tokens, w.num_items, w.item_tokens) == (2000, 500, 20)
    assert spec.http.clients == 1 and spec.http.requests == 5
    assert set(config.parity.checks) == {"engines", "concurrency", "order", "duplicates",
                                         "degenerate"}
    assert config.parity.reference.engine == "torch"

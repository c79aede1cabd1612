"""Conventions every command keeps (docs/cli.md, "Conventions of every command"): `--case`
is a repeatable glob in every command that selects cases; `--help` shows allowed values
and no placeholder noise; a config key with one allowed value is not required."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.testing import write_config

CASE_COMMANDS = ["run", "ab", "bisect", "compile", "history", "report", "compare", "export"]


def commands() -> dict:
    group = typer.main.get_command(app)
    out = {}
    for name, cmd in group.commands.items():
        for sub, inner in getattr(cmd, "commands", {}).items():
            out[f"{name} {sub}"] = inner
        if not getattr(cmd, "commands", None):
            out[name] = cmd
    return out


@pytest.mark.parametrize("name", CASE_COMMANDS)
def test_case_is_a_repeatable_glob_in_every_command_that_selects_cases(name):
    (case,) = [p for p in commands()[name].params if "--case" in p.opts]
    assert case.multiple and "glob" in case.help and "repeatable" in case.help


def help_of(*words: str) -> str:
    result = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("name", sorted(commands()))
def test_help_has_no_placeholder_noise(name):
    text = help_of(*name.split())
    assert not re.search(r"<(bool|str|int|float|path|list\[)", text), text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "{" not in usage and "}" not in usage, usage


@pytest.mark.parametrize("words, shown", [
    (["run"], "[auto|bar|lines|none]"),
    (["score"], "[jax|torch|http]"), (["score"], "[float32|bfloat16]"),
    (["score"], "[single|packed|chunked|prefill_extend]"),
    (["score"], "[delimited|plain]"), (["serve"], "[delimited|plain]"),
    (["serve"], "[single|packed|chunked|prefill_extend]"), (["serve"], "[float32|bfloat16]"),
    (["compare"], "[md|json]"), (["history"], "[md|json]"),
    (["export"], "[csv|json|bmf]"),
    (["model", "make"], "tiny, tiny-kv8"),
])
def test_help_shows_allowed_values(words, shown):
    assert shown in help_of(*words)


def test_usage_names_arguments_plainly():
    text = help_of("run")
    assert "Usage: root run [OPTIONS] CONFIG" in text or "run [OPTIONS] CONFIG" in text
    assert "report [OPTIONS] ARTIFACTS..." in help_of("report")


def test_an_engine_with_one_mode_needs_no_mode(tmp_path):
    config = load_config(write_config(tmp_path, """
        name: one-mode
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [198]}
        cases:
          - {engine: http, base_url: "http://127.0.0.1:9", clients: 1}
    """))
    (case,) = expand(config)
    assert case.mode == "single" and case.case_id.startswith("http/single/")
    with pytest.raises(Exception, match="cases.0.mode"):  # jax has several: required
        load_config(write_config(tmp_path, """
            name: several
            model: {path: "embedded:tiny"}
            workload: {query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [198]}
            cases:
              - {engine: jax}
        """))


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and re.match(r"^mibench \S+", result.output)


def test_validate_takes_several_configs(tmp_path):
    from pathlib import Path

    configs = Path(__file__).resolve().parents[1] / "configs"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    result = CliRunner().invoke(app, ["validate", str(configs / "cpu-smoke.yaml"),
                                      str(configs / "cpu.yaml")])
    assert result.exit_code == 0, result.output
    assert "== " in result.output and "cpu-smoke: " in result.output
    result = CliRunner().invoke(app, ["validate", str(configs / "cpu-smoke.yaml"), str(bad)])
    assert result.exit_code == 2 and "cpu-smoke: " in result.output and "bad.yaml" in result.output


def test_a_distribution_with_one_kind_needs_no_dist(tmp_path):
    config = load_config(write_config(tmp_path, """
        name: dist
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 8, num_items: 2, item_tokens: {min: 2, max: 4},
                   label_token_ids: [198]}
        cases: [{engine: jax, mode: single}]
    """))
    (case,) = expand(config)
    assert (case.workload.item_tokens.min, case.workload.item_tokens.max) == (2, 4)

"""Reproduce commands: the run's own invocation (config, --set overrides, multi-process
options, recorded by `mibench run`), the case selected by `--case ID`; the CLI accepts
the command as it is and it selects exactly that case; mode options render as in ids."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.keys import short
from mibench.harness.config.matrix import expand, select_cases
from mibench.harness.records import Invocation, read_artifact
from mibench.harness.report import fmt, write_report
from mibench.harness.report.repro import command, config_args, glob_escape

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data" / "reports"
CONFIG = "tests/data/reports/demo.yaml"
DIST = ["--coordinator", "10.0.0.1:1234", "--num-processes", "2", "--process-id", "0"]


def record_with(sets=(), options=()):
    rec = read_artifact(DATA / "new.json")
    rec.provenance.invocation = Invocation(config=CONFIG, sets=list(sets), options=list(options))
    return rec


@pytest.mark.parametrize("options", [[], DIST])
def test_reproduce_command_parses_back_and_selects_its_case(options):
    rec = record_with(["runs.warmup=2"], options)
    run = typer.main.get_command(app).commands["run"]
    for case in rec.cases:
        words = shlex.split(command(rec, case))
        assert words[:2] == ["mibench", "run"] and "--resume" not in words
        with run.make_context("run", words[2:]) as ctx:  # the CLI accepts it as it is
            params = ctx.params
        assert str(params["config"]) == CONFIG and params["set_"][0] == "runs.warmup=2"
        want = ("10.0.0.1:1234", 2, 0) if options else (None, None, None)
        assert (params["coordinator"], params["num_processes"], params["process_id"]) == want
        (spec,) = select_cases(expand(load_config(ROOT / CONFIG, params["set_"])),
                               params["case"])
        assert spec.case_id == case.case_id and spec.runs.warmup == 2


def test_glob_characters_in_an_id_are_escaped():
    import fnmatch

    for cid in ("jax/prefill_extend/precompile_bs=[1,2]", "a*b?c", "plain"):
        assert fnmatch.fnmatchcase(cid, glob_escape(cid))
        assert not fnmatch.fnmatchcase(cid + "x", glob_escape(cid))
    assert not fnmatch.fnmatchcase("jax/x=1", glob_escape("jax/x=[1]"))


def test_multi_process_runs_say_so():
    assert "--process-id" not in write_report([record_with()], None)
    multi = write_report([record_with(options=DIST)], None)
    assert "each with its own `--process-id`" in multi


def test_an_artifact_without_its_invocation_names_the_configs_folder():
    rec = read_artifact(DATA / "new.json")
    rec.provenance.invocation = None
    assert config_args(rec) == ("configs/v6e-demo.yaml", [], [])


@pytest.mark.parametrize("value, text", [([1, 2, 4, 8, 12], "1,2,4,8,12"), ([1, 2, 3, 4], "1-4"),
                                         ([1, 2], "1,2"), (32, "32"), ("segment", "segment")])
def test_mode_options_render_as_in_case_ids(value, text):
    case = read_artifact(DATA / "new.json").cases[0].model_copy(update={"params": {"o": value}})
    assert fmt.options(case) == f"o={text}" == f"o={short(value)}"

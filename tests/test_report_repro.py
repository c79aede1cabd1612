"""Reproduce commands: argv parsed by `mibench run` itself (every option, in any order),
defaults from the config models, and mode options rendered as in case ids."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import typer

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand, short
from mibench.harness.config.spec import Runs
from mibench.harness.records import read_artifact
from mibench.harness.report import fmt, write_report
from mibench.harness.report.repro import case_entry, command, config_args

ROOT = Path(__file__).parent.parent
DATA = ROOT / "tests" / "data" / "reports"
CONFIG = "tests/data/reports/demo.yaml"
DIST = ["--coordinator", "10.0.0.1:1234", "--num-processes", "2", "--process-id", "0"]
SETS = ["--set", "runs.warmup=2"]


def record_with(argv: list[str]):
    rec = read_artifact(DATA / "new.json")
    rec.provenance.argv = argv
    return rec


@pytest.mark.parametrize("argv", [
    ["mibench", "run", *DIST, CONFIG, *SETS],
    ["mibench", "run", CONFIG, *DIST, *SETS],
    ["mibench", "run", *SETS, "--out=artifacts", *DIST, CONFIG],
    ["/venv/bin/mibench", "run", "--set=runs.warmup=2", "--coordinator=10.0.0.1:1234",
     "--num-processes=2", "--process-id=0", "--resume", "old.json", CONFIG],
])
def test_distributed_options_anywhere_give_the_config_and_are_kept(argv):
    config, sets, extra = config_args(record_with(argv))
    assert (config, sets, extra) == (CONFIG, ["runs.warmup=2"], DIST)


@pytest.mark.parametrize("where", ["before", "after"])
def test_reproduce_command_parses_back_and_selects_its_case(where):
    argv = ["mibench", "run", *DIST, CONFIG] if where == "before" else \
        ["mibench", "run", CONFIG, *DIST]
    rec = record_with(argv + SETS)
    run = typer.main.get_command(app).commands["run"]
    for case in rec.cases:
        words = shlex.split(command(rec, case))
        assert words[:2] == ["mibench", "run"] and "--resume" not in words
        with run.make_context("run", words[2:]) as ctx:  # the CLI accepts it as it is
            params = ctx.params
        assert str(params["config"]) == CONFIG and params["set_"][0] == "runs.warmup=2"
        assert (params["coordinator"], params["num_processes"], params["process_id"]) == (
            "10.0.0.1:1234", 2, 0)
        (spec,) = expand(load_config(ROOT / CONFIG, params["set_"]))
        assert (spec.engine, spec.mode, spec.params, spec.tp, spec.model, spec.runs.warmup) == (
            case.engine, case.mode, case.params, case.topology["tp"], case.model["path"], 2)
        assert spec.workload.as_dict() == case.workload


def test_single_process_commands_have_no_distributed_options(tmp_path):
    rec = record_with(["mibench", "run", CONFIG, "--out", "artifacts"])
    assert config_args(rec) == (CONFIG, [], [])
    assert "--process-id" not in write_report([rec], None)
    multi = write_report([record_with(["mibench", "run", CONFIG, *DIST])], None)
    assert "each with its own `--process-id`" in multi


def test_not_a_mibench_run_falls_back_to_the_configs_folder():
    rec = record_with(["python", "-c", "..."])
    assert config_args(rec) == ("configs/v6e-demo.yaml", [], [])


def test_defaults_come_from_the_config_models():
    """A config that sets no runs and no seed: a case at the models' defaults needs no patch,
    one off them does."""
    rec = read_artifact(DATA / "new.json")
    config = {k: v for k, v in rec.config.items() if k != "runs"}
    config["workload"] = {k: v for k, v in config["workload"].items() if k != "seed"}
    case = rec.cases[0].model_copy(deep=True)
    case.runs = {**Runs().model_dump(), "timeout_s": None}
    case.workload = {**case.workload, "seed": 0}
    assert "runs" not in case_entry(case, config) and "workload" not in case_entry(case, config)
    case.runs["timed"] = Runs().timed + 1
    case.workload["seed"] = 1
    entry = case_entry(case, config)
    assert entry["runs"] == {"timed": Runs().timed + 1} and entry["workload"] == {"seed": 1}


@pytest.mark.parametrize("value, text", [([1, 2, 4, 8, 12], "1,2,4,8,12"), ([1, 2, 3, 4], "1-4"),
                                         ([1, 2], "1,2"), (32, "32"), ("segment", "segment")])
def test_mode_options_render_as_in_case_ids(value, text):
    case = read_artifact(DATA / "new.json").cases[0].model_copy(update={"params": {"o": value}})
    assert fmt.options(case) == f"o={text}" == f"o={short(value)}"

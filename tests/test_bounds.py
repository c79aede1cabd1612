"""Counts and names are bounded at the edge, each with its reason (harness/config/bounds.py):
a config's name must leave its run id's files within a file name's 255 bytes, and
`runs.processes`, `runs.warmup`, `runs.timed`, an http case's `requests`,
`warmup_requests` and `clients`, and `--rounds` have bounds a useful run never reaches.
Each bound is exact: the bound passes, one more is one line naming the key and why."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import ConfigError, load_config
from mibench.harness.config.bounds import BOUNDS, MAX_NAME, NAME_MAX
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import fake_factory, fixed_peak, write_config

BASE = """
name: NAME
model: {path: "embedded:tiny"}
workload: {query_tokens: 6, num_items: 3, item_tokens: 2, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
  - {engine: http, mode: single, base_url: "http://127.0.0.1:9", clients: 1}
"""


def config(tmp_path, name: str = "b"):
    return write_config(tmp_path, BASE.replace("NAME", name))


@pytest.mark.parametrize("key,path", [
    ("runs.processes", "runs.processes"), ("runs.warmup", "runs.warmup"),
    ("runs.timed", "runs.timed"), ("requests", "cases.1.requests"),
    ("warmup_requests", "cases.1.warmup_requests"), ("clients", "cases.1.clients"),
])
def test_each_count_is_bounded_exactly_with_its_reason(tmp_path, key, path):
    limit, why = BOUNDS[key]
    cfg = config(tmp_path)
    load_config(cfg, [f"{path}={limit}"])
    with pytest.raises(ConfigError) as err:
        load_config(cfg, [f"{path}={limit + 1}"])
    assert f"{path}: {limit + 1} is more than {limit}: {why}" in str(err.value)


def test_runs_processes_100000_is_refused_by_validate(tmp_path):
    """Before: accepted, a run of 100000 fresh workers per case."""
    out = CliRunner().invoke(app, ["validate", str(config(tmp_path)), "--set",
                                   "runs.processes=100000"])
    assert out.exit_code == 2
    assert "runs.processes: 100000 is more than 100: each process is a fresh worker" in \
        out.stderr


def test_a_name_too_long_for_a_file_name_is_a_config_error_naming_name(tmp_path):
    """Before: 300 characters passed `validate` and failed `run` (File name too long)."""
    out = CliRunner().invoke(app, ["validate", str(config(tmp_path, "n" * 300))])
    assert out.exit_code == 2, out.output
    assert f"c.yaml:1: name: 300 is more than {MAX_NAME} characters: the run id" in \
        out.stderr, out.stderr
    assert f"must fit a file name's {NAME_MAX} bytes" in out.stderr


def test_the_longest_name_runs_and_its_files_fit(tmp_path):
    cfg = load_config(config(tmp_path, "n" * MAX_NAME))
    record = run(plan_of(cfg, out=tmp_path / "out", progress=False, cases=["jax/*"],
                         engine_factory=fake_factory(), peak=fixed_peak()))
    (path,) = (tmp_path / "out").glob("*.json")
    assert path.name == f"{record.run_id}.json" and record.cases[0].status == "ok"
    # the longest files named after the run id: its temporary file while it is written
    # (`.<name>.<8 random>.tmp`) and a compile run's id with the longest target
    assert len(f".{path.name}.abcdefgh.tmp".encode()) <= NAME_MAX
    assert len(f"{'n' * MAX_NAME}-v5e-256-20261126T174134Z-2396.json.abcdefgh.tmp.") <= NAME_MAX


def test_rounds_are_bounded_before_anything_is_built():
    out = CliRunner().invoke(app, ["bisect", "a", "b", "none.yaml", "--case", "x",
                                   "--rounds", "1001"])
    assert out.exit_code == 2
    assert "--rounds: 1001 is more than 1000: each round starts fresh workers" in out.stderr


LAUNCHED = BASE + """\
  - engine: http
    launch: {command: ["python", "-m", "mibench.harness.cli", "serve", "--port", "{port}"]}
    clients: 2
"""


@pytest.mark.parametrize("key,assignment", [
    ("cold_start.launches", "cases.2.cold_start={launches: N}"),
    ("concurrency.trials", "cases.2.concurrency={trials: N}"),
])
def test_launches_and_trials_are_bounded_with_their_reason(tmp_path, key, assignment):
    limit, why = BOUNDS[key]
    cfg = write_config(tmp_path, LAUNCHED.replace("NAME", "b"))
    load_config(cfg, [assignment.replace("N", str(limit))])
    with pytest.raises(ConfigError) as err:
        load_config(cfg, [assignment.replace("N", str(limit + 1))])
    assert f"{limit + 1} is more than {limit}: {why}" in str(err.value)


@pytest.mark.parametrize("args,flag", [
    (["nightly", "{C}", "--history", "{T}/h", "--seed-runs", "100000"], "--seed-runs"),
    (["nightly", "{C}", "--history", "{T}/h", "--max-rounds", "5000"], "--max-rounds"),
    (["job", "nightly-scenario", "--out", "{T}/s", "--seed-runs", "100000"], "--seed-runs"),
    (["job", "overhead", "--rounds", "100000"], "--rounds"),
])
def test_every_count_flag_is_bounded_before_anything_starts(tmp_path, args, flag):
    """Issue 45: `nightly --seed-runs 100000` was accepted and started seeding."""
    cfg = config(tmp_path)
    args = [a.replace("{C}", str(cfg)).replace("{T}", str(tmp_path)) for a in args]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 2, out.output
    limit, why = BOUNDS[flag]
    assert f"{flag}: " in out.stderr and f"is more than {limit}: {why}" in out.stderr, \
        out.stderr
    assert not (tmp_path / "h").exists() and not (tmp_path / "s").exists()

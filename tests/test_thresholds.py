"""One threshold option: `--threshold 5%` is the time threshold, `--threshold memory=10%` and
`--threshold cost=5%` the others (repeatable, each kind once, only the kinds a command has);
the old `--memory-threshold` / `--cost-threshold` still work, hidden, with one line on stderr
naming the new form (harness/commands/common.py `parse_thresholds`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.cli import app
from mibench.harness.commands.common import parse_thresholds

DATA = Path(__file__).parent / "data"
BASE, NEW = DATA / "reports" / "base.json", DATA / "reports" / "new.json"
COMPILED = DATA / "compile-tiny-v6e-1.json"
ALL = ("time", "memory", "cost")


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_bare_and_kind_forms():
    assert parse_thresholds(None, ALL) == {"time": 0.05, "memory": 0.10, "cost": 0.05}
    assert parse_thresholds(["7%", "memory=20%", "cost=0.02"], ALL) == {
        "time": 0.07, "memory": 0.20, "cost": 0.02}
    assert parse_thresholds(["time=3%"], ("time",)) == {"time": 0.03}


@pytest.mark.parametrize("given,kinds,needle", [
    (["memroy=3%"], ALL, "--threshold: 'memroy=3%': no memroy threshold here; did you mean "
                         "'memory'?"),
    (["5%"], ("cost",), "no time threshold here (give cost=P)"),  # ab: cost only
    (["memory=5%"], ("time",), "no memory threshold here"),  # report, bisect, nightly
    (["5%", "time=6%"], ALL, "--threshold: time given twice"),
    (["cost=lots"], ALL, "--threshold cost: not a number"),
])
def test_bad_threshold_names_the_option(given, kinds, needle):
    with pytest.raises(MibenchError) as e:
        parse_thresholds(given, kinds)
    assert needle in str(e.value)


def test_compare_takes_every_kind():
    out = cli("compare", BASE, NEW, "--threshold", "memory=20%", "--threshold", "7%",
              "--format", "json")
    data = json.loads(out.stdout)
    assert (data["threshold"], data["memory_threshold"]) == (0.07, 0.2)
    out = cli("compare", COMPILED, COMPILED, "--threshold", "cost=3%", "--format", "json")
    assert json.loads(out.stdout)["threshold"] == 0.03 and out.exit_code == 0


def test_old_options_still_work_hidden_with_one_line():
    out = cli("compare", BASE, NEW, "--memory-threshold", "20%", "--format", "json")
    assert json.loads(out.stdout)["memory_threshold"] == 0.2
    assert out.stderr.splitlines() == [
        "warning: --memory-threshold is deprecated: use --threshold memory=20%"]
    out = cli("compare", COMPILED, COMPILED, "--cost-threshold", "3%", "--format", "json")
    assert json.loads(out.stdout)["threshold"] == 0.03
    assert "use --threshold cost=3%" in out.stderr
    both = cli("compare", BASE, NEW, "--memory-threshold", "20%", "--threshold", "memory=5%")
    assert both.exit_code == 2 and "--memory-threshold: give it once" in both.stderr
    assert "--memory-threshold" not in cli("compare", "--help").stdout


@pytest.mark.parametrize("command", ["compare", "ab", "bisect", "nightly", "report"])
def test_every_judging_command_has_the_one_option(command):
    """--threshold in each, KIND=P named in the help where the command has more than time."""
    text = cli(command, "--help").stdout
    assert "--threshold" in text
    assert ("cost=P" in text) == (command in ("compare", "ab"))
    assert ("memory=P" in text) == (command == "compare")

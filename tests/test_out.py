"""`--out` means one thing (docs/cli.md "Where --out writes"): a folder in every command; a
command whose output is one file (report, history, export, the JSON of job overhead and job
serve-flood) also takes the file itself, a path ending in a file suffix. A folder command
refuses a file name rather than making a folder called `x.json`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.cli import app
from mibench.harness.commands.common import out_file, writable_folder

DATA = Path(__file__).parent / "data" / "reports"
BASE, NEW = DATA / "base.json", DATA / "new.json"


def cli(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


@pytest.mark.slow
def test_one_file_commands_take_a_folder_or_a_file(tmp_path):
    out = cli("report", NEW, "--baseline", BASE, "--out", tmp_path / "reports")
    assert out.exit_code == 0, out.output
    assert (tmp_path / "reports" / "report.md").read_text().startswith("#")
    assert cli("export", BASE, "--out", tmp_path / "rows").exit_code == 0
    assert (tmp_path / "rows" / "cases.csv").read_text().startswith("run_id,")
    assert cli("export", BASE, "--format", "bmf", "--out", tmp_path / "rows").exit_code == 0
    assert json.loads((tmp_path / "rows" / "cases.json").read_text())
    assert cli("export", BASE, "--out", tmp_path / "cases.csv").exit_code == 0
    assert (tmp_path / "cases.csv").is_file()


def test_out_file_rules(tmp_path):
    existing = tmp_path / "notes"  # a file without a suffix that exists: still the file
    existing.write_text("old")
    assert out_file(existing, "report.md") == existing
    assert out_file(tmp_path / "a.md", "report.md") == tmp_path / "a.md"  # `--out FILE.md`
    (tmp_path / "b.md").mkdir()  # a folder named like a file: a folder
    assert out_file(tmp_path / "b.md", "report.md") == tmp_path / "b.md" / "report.md"
    assert out_file(tmp_path / "c", "history.md") == tmp_path / "c" / "history.md"
    assert out_file(None, "report.md") is None
    with pytest.raises(MibenchError, match="--out: .*notes is a file"):
        out_file(existing / "x.md", "report.md")


def test_folder_commands_refuse_a_file_name(tmp_path):
    with pytest.raises(MibenchError, match=r"--out: .*x\.json names a file, but this command "
                                           r"writes a folder"):
        writable_folder(tmp_path / "x.json", "--out")
    assert writable_folder(tmp_path / "x", "--out").is_dir()
    out = cli("run", Path(__file__).parents[1] / "configs" / "cpu-smoke.yaml", "--out",
              tmp_path / "run.json")
    assert out.exit_code == 2 and "names a file" in out.stderr
    assert not (tmp_path / "run.json").exists()


FOLDER_COMMANDS = [["run", "c.yaml"], ["compile", "c.yaml"], ["ab", "a", "b", "c.yaml"],
                   ["model", "make", "tiny"], ["site", "h"], ["job", "gpu"],
                   ["job", "calibrate"], ["job", "verdicts"], ["job", "invariance"],
                   ["job", "score-checks"], ["job", "nightly-scenario"],
                   ["job", "nightly-suite"], ["job", "site-scale"]]


@pytest.mark.parametrize("args", FOLDER_COMMANDS, ids=" ".join)
def test_every_folder_command_refuses_a_file_name_while_parsing(args):
    """Parsed only (nothing runs, whatever the outcome): the `--out` callback refuses."""
    import typer

    from mibench.harness.commands.common import click_errors  # typer's own click

    command = typer.main.get_command(app)
    args = [*args, "--out", "x.json"]
    while hasattr(command, "commands"):
        command = command.commands[args.pop(0)]
    with pytest.raises(click_errors.BadParameter, match="x.json names a file"):
        command.make_context("mibench", list(args))  # (click consumes the list it gets)
    command.make_context("mibench", [*args[:-1], "x"])  # a folder: fine

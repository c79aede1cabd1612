"""The nightly workflow and `nox -s nightly` run the same, existing commands."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from mibench.harness.config import load_config

ROOT = Path(__file__).parent.parent


def workflow_script() -> tuple[dict, str]:
    flow = yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())
    (job,) = flow["jobs"].values()
    return job, "\n".join(step.get("run", "") for step in job["steps"])


def test_workflow_runs_compares_reports_uploads_and_gates():
    job, script = workflow_script()
    assert "self-hosted" in job["runs-on"]
    load_config(ROOT / job["env"]["CONFIG"])  # configs/v6e1.yaml exists and validates
    for command in ('mibench run "$CONFIG"', 'mibench compare "$BASELINE"', "--threshold 5%",
                    "mibench report", "mibench history", 'GITHUB_STEP_SUMMARY"'):
        assert command in script, command
    steps = {s.get("name"): s for s in job["steps"]}
    assert steps["Upload artifacts and reports"]["uses"].startswith("actions/upload-artifact")
    assert steps["Fail on regression"]["if"] == "steps.compare.outputs.rc == '1'"


def test_nox_nightly_session_runs_the_same_commands_on_cpu():
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "nightly"]
    words = {c.value for c in ast.walk(fn) if isinstance(c, ast.Constant)}
    assert {"mibench", "run", "configs/cpu-smoke.yaml", "compare", "report", "history",
            "--threshold", "5%"} <= words
    load_config(ROOT / "configs/cpu-smoke.yaml")


def test_commands_are_registered_on_the_mibench_app(tmp_path):
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    data = ROOT / "tests/data/reports"
    run = CliRunner().invoke
    assert run(app, ["compare", str(data / "base.json"), str(data / "new.json")]).exit_code == 0
    assert run(app, ["report", str(data / "new.json")]).exit_code == 0
    assert run(app, ["history", str(tmp_path)]).exit_code == 2  # empty folder

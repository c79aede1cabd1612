"""The nightly workflow and `nox -s nightly` run the same command, `mibench nightly`, each TPU
job with its own history folder."""

from __future__ import annotations

import ast
from pathlib import Path

import yaml

from mibench.harness.config import load_config

ROOT = Path(__file__).parent.parent


def workflow() -> dict:
    return yaml.safe_load((ROOT / ".github/workflows/nightly.yml").read_text())


def script(job: dict) -> str:
    return "\n".join(step.get("run", "") for step in job["steps"])


def test_each_tpu_job_runs_the_nightly_command_with_its_own_history():
    flow = workflow()
    jobs = {name: job for name, job in flow["jobs"].items()
            if any("mibench nightly" in s.get("run", "") for s in job["steps"])}
    assert set(jobs) == {"v6e1", "v6e1-sglang-jax"}
    # after the nights: the site of both histories, then its publication
    assert flow["jobs"]["site"]["needs"] == ["v6e1", "v6e1-sglang-jax"]
    assert flow["jobs"]["pages"]["needs"] == "site"
    histories = set()
    for name, job in jobs.items():
        assert job["runs-on"] == ["self-hosted", "tpu", "v6e-1"]
        load_config(ROOT / job["env"]["CONFIG"])  # the config exists and validates
        text = script(job)
        assert 'mibench nightly "$CONFIG" --history "$HISTORY"' in text, name
        assert "$GITHUB_STEP_SUMMARY" in text
        histories.add(job["env"]["HISTORY"])
        checkout = job["steps"][0]
        assert checkout["uses"].startswith("actions/checkout") and \
            checkout["with"]["fetch-depth"] == 0  # ab and bisect reach the last pass
        night = next(s for s in job["steps"] if "mibench nightly" in s.get("run", ""))
        assert night.get("shell") == "bash"  # -o pipefail: `| tee` keeps the exit code
        upload = [s for s in job["steps"] if s.get("uses", "").startswith(
            "actions/upload-artifact")]
        assert upload and upload[0]["if"] == "always()"
    assert len(histories) == 2  # one history folder per job
    assert flow["concurrency"]["group"] == "nightly-tpu-v6e1"  # one chip


def test_the_compile_step_comes_before_the_nightly():
    names = [s.get("name") for s in workflow()["jobs"]["v6e1"]["steps"]]
    assert names.index("Compile for the TPU") < names.index(
        "Nightly (run, judge, confirm, bisect)")


def test_the_sglang_jax_job_judges_its_checkout_after_the_engines_night():
    job = workflow()["jobs"]["v6e1-sglang-jax"]
    assert job["needs"] == "v6e1"
    text = script(job)
    assert "python3.12 -m venv .sgl" in text and "./sglang-jax/python[tpu]" in text
    assert "--server-repo sglang-jax" in text
    sgl = next(s for s in job["steps"] if s.get("with", {}).get("path") == "sglang-jax")
    assert "SGLANG_JAX_REPO" in sgl["with"]["repository"]
    assert "SGLANG_JAX_REF" in sgl["with"]["ref"]
    night = next(s for s in job["steps"] if "mibench nightly" in s.get("run", ""))
    assert night["env"]["MIBENCH_SGLANG_JAX"].endswith("/.sgl/bin/python")
    assert "servers" in script(job)  # the servers' logs go up with the night


def test_nox_nightly_session_runs_the_same_command_on_cpu():
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "nightly"]
    words = {c.value for c in ast.walk(fn) if isinstance(c, ast.Constant)}
    assert {"mibench", "nightly", "configs/cpu-smoke.yaml", "--history"} <= words
    load_config(ROOT / "configs/cpu-smoke.yaml")


def test_commands_are_registered_on_the_mibench_app(tmp_path):
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    data = ROOT / "tests/data/reports"
    run = CliRunner().invoke
    compare = ["compare", str(data / "base.json"), str(data / "new.json")]
    assert run(app, compare).exit_code == 1  # jax/single timed once: untested
    assert run(app, [*compare, "--allow-untested"]).exit_code == 0
    assert run(app, ["report", str(data / "new.json")]).exit_code == 0
    assert run(app, ["history", str(tmp_path)]).exit_code == 2  # empty folder

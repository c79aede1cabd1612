"""The nightly workflow and `nox -s nightly` run the same, existing commands."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
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
    compare = ["compare", str(data / "base.json"), str(data / "new.json")]
    assert run(app, compare).exit_code == 1  # jax/single timed once: untested
    assert run(app, [*compare, "--allow-untested"]).exit_code == 0
    assert run(app, ["report", str(data / "new.json")]).exit_code == 0
    assert run(app, ["history", str(tmp_path)]).exit_code == 2  # empty folder


# --- `nox -s nightly` with a fake session: the gate decides what becomes the baseline ------


class SessionError(Exception):
    pass


class FakeSession:
    """What `nightly` uses of a nox session; `mibench run` writes the next prepared artifact,
    report and history do nothing, and the gate (`subprocess.run` of `mibench compare`) runs
    in-process."""

    bin = "/nonexistent"

    def __init__(self, artifact, posargs=()):
        self.artifact, self.posargs, self.logs = artifact, list(posargs), []

    def install(self, *args, **kwargs):
        pass

    def run(self, *args, env=None, success_codes=None):
        if args[:2] == ("mibench", "run"):
            from mibench.harness.records import write_artifact

            out = Path(args[args.index("--out") + 1])
            write_artifact(self.artifact, out / f"{self.artifact.run_id}.json")

    def error(self, message):
        raise SessionError(message)

    def log(self, message):
        self.logs.append(message)


def _gate(argv, env=None, capture_output=True, text=True):
    import subprocess

    from typer.testing import CliRunner

    from mibench.harness.cli import app

    out = CliRunner().invoke(app, argv[1:])
    return subprocess.CompletedProcess(argv, out.exit_code, out.stdout, out.stderr)


def test_nightly_promotes_only_what_passes_the_gate_or_is_asked_for(tmp_path, monkeypatch):
    import importlib.util
    import json
    import subprocess

    from mibench.harness.records import ErrorInfo, read_artifact

    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    monkeypatch.setattr(subprocess, "run", _gate)
    monkeypatch.chdir(tmp_path)
    real = read_artifact(ROOT / "tests/data/reports/real-smoke.json")

    def artifact(k: int, edit=None):
        rec = real.model_copy(deep=True)
        rec.run_id = f"cpu-smoke-{k}"
        if edit:
            edit(rec)
        return rec

    def nightly(rec, *posargs):
        noxfile.nightly(FakeSession(rec, posargs))

    def skip_all(rec):
        for c in rec.cases:
            c.status, c.error = "skipped", ErrorInfo(type="Skipped", message="-", traceback="")

    def slower(rec):
        make = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
            "make_artifacts", ROOT / "tests/data/reports/make_artifacts.py"))
        make.__spec__.loader.exec_module(make)
        for c in rec.cases:
            make.set_times(c, [2 * t for t in c.timed_s])

    def more_items(rec):
        for c in rec.cases:
            c.workload.num_items = 32
            c.metrics.throughput_items_per_s = c.metrics.latency_per_item_ms = None

    baseline, ledger = Path("out/nightly/baseline.json"), Path("out/nightly/baselines.jsonl")
    nightly(artifact(1))  # no baseline yet: the first run passes against itself
    nightly(artifact(2))  # the same measurement again: the gate passes
    for k, edit, rc in ((3, skip_all, 2), (4, more_items, 2), (5, slower, 1)):
        with pytest.raises(SessionError, match=f"the gate exited {rc}"):  # never promoted
            nightly(artifact(k, edit))
        assert read_artifact(baseline).run_id == "cpu-smoke-2"
        verdict = "**NOT COMPARED**" if rc == 2 else "**REGRESSION**"
        assert verdict in Path("out/nightly/compare.md").read_text()
    nightly(artifact(6, more_items), "--rebaseline")  # asked for: a new baseline
    assert read_artifact(baseline).run_id == "cpu-smoke-6"
    reasons = [json.loads(line)["reason"] for line in ledger.read_text().splitlines()]
    assert reasons == ["first baseline", "the gate passed", "rebaselined on request"]
    assert json.loads(ledger.read_text().splitlines()[-1])["replaced"] == "cpu-smoke-2"

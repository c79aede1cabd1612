"""The prepared GPU job, dry-run on this CPU with the tiny preset, the way a bare GPU
machine runs it (`python -m mibench.harness.cli job gpu`): every case of configs/gpu.yaml
runs, parity passes, the artifact, report and stage profile are written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# the dry run with only parity's `engines` check (jax against torch): the other checks on
# every mode are tests/test_harness_real.py's cpu-smoke run; the job, its cases, artifact,
# report and profile are the same
CHECKS_ENGINES = ("from mibench.harness.jobs import gpu_job; from mibench.harness.cli import "
                  "app; gpu_job.DRY_SETS += ('parity.checks=[engines]',); app()")


def dry_run(out: Path, checks: str) -> dict:
    """`mibench job gpu --dry-run --out OUT` in a child process (`checks`: every check of
    configs/gpu.yaml, or "engines"); its artifact, after the job's own checks."""
    cmd = ["-m", "mibench.harness.cli"] if checks == "all" else ["-c", CHECKS_ENGINES]
    proc = subprocess.run([sys.executable, *cmd, "job", "gpu", "--dry-run", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    artifact = json.loads(next(p for p in out.glob("gpu-*.json")).read_text())
    assert artifact["config"]["name"] == "gpu"
    assert len(artifact["cases"]) >= 10
    assert all(c["status"] == "ok" for c in artifact["cases"]) and artifact["parity"]["passed"]
    assert {c["resolved"].get("attention") for c in artifact["cases"]
            if c["engine"] == "jax"} <= {"xla", "xla-masked"}  # auto on a CPU: the tiled path
    assert (out / "report" / "report.md").read_text().startswith("#")
    summary = json.loads((out / "summary.json").read_text())
    for attention in ("auto", "xla"):
        stages = summary[f"profile_{attention}"]
        assert stages["attention"] == "xla" and stages["items"] == 12
        assert 0 < stages["prefill_ms"] and 0 < stages["extend_ms"] and 0 < stages["score_ms"]
    kernels = summary["profile_auto"]["top_kernels"]  # from a JAX profiler trace
    assert kernels and all(k["total_ms"] > 0 and k["calls"] > 0 for k in kernels)
    return artifact


# a long scenario (nox -s scenarios); its small version: test_gpu_job_dry_run_engines_parity
@pytest.mark.scenario
@pytest.mark.slow
def test_gpu_job_dry_run(tmp_path):
    checks = {c["check"] for c in dry_run(tmp_path / "gpu", "all")["parity"]["checks"]}
    assert checks == {"isolation", "modes", "engines", "order", "duplicates", "degenerate"}


@pytest.mark.slow
def test_gpu_job_dry_run_engines_parity(tmp_path):
    artifact = dry_run(tmp_path / "gpu", "engines")
    assert {c["check"] for c in artifact["parity"]["checks"]} == {"engines"}
    assert {c["engine"] for c in artifact["cases"]} == {"jax", "torch"}


@pytest.mark.slow
def test_gpu_job_without_a_gpu_is_one_line_exit_2(tmp_path):
    """No GPU and no --dry-run, or a budget that is not positive: `error: ...`, exit 2."""
    for args, message in ((["--budget-s", "0"], "--budget-s: must be a positive number"),
                          ([], "no GPU visible to JAX")):
        proc = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "job", "gpu",
                               "--out", str(tmp_path / "gpu"), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
        assert lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "gpu").exists()  # refused before anything was written


def test_the_profiles_of_both_attention_paths_share_one_engine(tmp_path, monkeypatch):
    """The job loads the profiled case's engine once for both paths (a real model takes
    seconds to minutes of the budget to load); a load that fails is each profile's error."""
    from mibench.harness.jobs import gpu_job

    loads, profiled = [], []
    monkeypatch.setattr(gpu_job, "machine", lambda: {"devices": ["cpu:0"], "missing": []})
    monkeypatch.setattr(gpu_job, "run_config", lambda out, sets, budget_s: 0)
    monkeypatch.setattr(gpu_job, "profiled", lambda dry: loads.append(dry) or ("engine",))
    monkeypatch.setattr(gpu_job, "profile", lambda loaded, attention, kernels: profiled.append(
        (loaded, attention, kernels)) or {"attention": attention})
    assert gpu_job.main(tmp_path / "a", dry_run=True) == 0
    assert loads == [True]
    assert profiled == [(("engine",), "auto", True), (("engine",), "xla", False)]

    def broken(dry):  # control: nothing loaded, so nothing is shared
        loads.append(dry)
        raise RuntimeError("no memory")

    monkeypatch.setattr(gpu_job, "profiled", broken)
    assert gpu_job.main(tmp_path / "b", dry_run=True) == 0
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["profile_auto"] == summary["profile_xla"] == {
        "error": "RuntimeError: no memory"}
    assert loads == [True, True, True]

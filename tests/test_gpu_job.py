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


@pytest.mark.slow
def test_gpu_job_dry_run(tmp_path):
    out = tmp_path / "gpu"
    proc = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "job", "gpu",
                           "--dry-run", "--out", str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
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

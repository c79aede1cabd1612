"""The runner with the real engines on `embedded:tiny`: a case that fails inside the engine,
parity between JAX and the PyTorch reference, and a killed run that --resume completes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.records import SCHEMA_FILE
from mibench.harness.testing import write_config

pytestmark = pytest.mark.slow  # real runs in subprocesses and workers

SCHEMA = json.loads(SCHEMA_FILE.read_text())
CONFIG = """
name: real
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 16, num_items: 4, item_tokens: 3, label_token_ids: [198, 9834],
           delimiter: 151643}
runs: {warmup: 0, timed: 1}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: single, attention: cudnn}  # fails on a CPU, inside the engine
  - {engine: torch, mode: single}
parity: {checks: [isolation, engines]}
"""


def only_artifact(folder: Path) -> tuple[Path, dict]:
    (path,) = folder.glob("*.json")
    data = json.loads(path.read_text())
    jsonschema.validate(data, SCHEMA)
    return path, data


def test_case_failing_inside_the_engine_is_recorded(tmp_path):
    result = CliRunner().invoke(app, ["run", str(write_config(tmp_path, CONFIG)),
                                      "--out", str(tmp_path / "out"), "--engine-repo", "."])
    assert result.exit_code == 3, result.output
    _, data = only_artifact(tmp_path / "out")
    assert [c["status"] for c in data["cases"]] == ["ok", "failed", "ok"]
    err = data["cases"][1]["error"]
    assert err["type"] == "MibenchError" and "attention" in err["message"]
    assert "cudnn" in err["message"] and "Traceback" in err["traceback"]
    # mfu is None by design when no quiet peak calibration is cached (a busy machine's is
    # never cached): assert what is guaranteed, the useful work and mfu iff a peak
    m = data["cases"][0]["metrics"]
    assert m["useful_flops"] > 0 and (m["mfu"] is None) == (m["peak_flops"] is None), m
    if m["mfu"] is not None:
        assert m["mfu"] == pytest.approx(m["useful_flops"] / (m["total_s"]["median"]
                                                               * m["peak_flops"]))
    assert data["provenance"]["engine_repo"]["commit"] == data["provenance"]["git"]["commit"]
    parity = data["parity"]
    assert parity["passed"], parity
    engines = [c for c in parity["checks"] if c["check"] == "engines"]
    assert engines[0]["max_abs_diff"] <= 1e-4 and engines[0]["against"].startswith("torch")
    assert "2/3 cases ok" in result.output and "MibenchError" in result.output


DRIVER = """
import sys, time
from mibench.harness.config import load_config
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import fake_factory, fixed_peak
def slow(engine, n):
    time.sleep(0.3)
run(plan_of(load_config(sys.argv[1]), out=sys.argv[2], progress=False,
            engine_factory=fake_factory(on_call=slow), peak=fixed_peak()))
"""


def test_killed_run_leaves_valid_artifact_that_resume_completes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside any git checkout: no commits to mix on resume
    config = write_config(tmp_path, CONFIG.replace("engine: torch, mode: single",
                                                   "engine: jax, mode: single, workload: {seed: 1}")
                          .replace("parity: {checks: [isolation, engines]}", ""))
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(config), str(out)], env=env,
                            cwd=tmp_path)
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            arts = list(out.glob("*.json"))
            if arts and json.loads(arts[0].read_text())["cases"]:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    path, data = only_artifact(out)
    assert 1 <= len(data["cases"]) < 3 and data["finished_at"] is None
    result = CliRunner().invoke(app, ["run", str(config), "--resume", str(path)])
    assert result.exit_code == 3, result.output  # the label case fails, for real
    _, done = only_artifact(out)
    assert done["run_id"] == data["run_id"] and done["finished_at"]
    assert [c["case_id"] for c in done["cases"]][0] == data["cases"][0]["case_id"]
    assert done["cases"][0] == data["cases"][0]  # kept as measured before the kill
    assert [c["status"] for c in done["cases"]] == ["ok", "failed", "ok"]


@pytest.mark.slow
def test_cpu_smoke_config_runs_clean(tmp_path):
    """The README's main command: every case ok, every parity check passing (~1.5 min)."""
    config = Path(__file__).parent.parent / "configs" / "cpu-smoke.yaml"
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    _, data = only_artifact(tmp_path)
    assert data["cases"] and all(c["status"] == "ok" for c in data["cases"])
    assert data["parity"]["passed"] and len(data["parity"]["checks"]) >= 10


def test_text_requests_are_tokenized_once(tmp_path):
    (tmp_path / "reqs.jsonl").write_text(json.dumps(
        {"query": "Is this a good match for a rainy day?", "items": ["umbrella", "sunglasses",
                                                                      "boots"]}) + "\n")
    config = write_config(tmp_path, """
        name: text
        model: {path: "embedded:tiny"}
        workload: {requests: reqs.jsonl, label_token_ids: [198, 9834], delimiter: 151643}
        runs: {warmup: 0, timed: 1}
        cases: [{engine: jax, mode: single}]
        """)
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    _, data = only_artifact(tmp_path / "out")
    assert data["cases"][0]["metrics"]["throughput_items_per_s"]["n"] == 1

"""The mibench CLI: score, env, model make, help; errors are one line and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from conftest import python_start_s
from typer.testing import CliRunner

from mibench.harness.cli import app

runner = CliRunner()


def mibench(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_help_is_fast_and_lazy():
    t0 = time.perf_counter()
    out = mibench("--help")
    assert out.returncode == 0 and "validate" in out.stdout
    took = time.perf_counter() - t0
    assert took < 5 + 50 * python_start_s(), took  # a busy machine slows both alike
    probe = "import sys, mibench.harness.cli; print('jax' in sys.modules, 'torch' in sys.modules)"
    lazy = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert lazy.stdout.split() == ["False", "False"]


def test_error_is_one_line_on_stderr_exit_2(tmp_path):
    out = mibench("validate", str(tmp_path / "missing.yaml"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.strip().splitlines() == [f"error: {tmp_path / 'missing.yaml'}: "
                                               "no such config file"]


def test_score_ids_json_out():
    result = runner.invoke(app, ["score", "--query-ids", "1,2,3,4", "--item-ids", "5,6",
                                 "--item-ids", "7", "--labels", "198,9834", "--delimiter",
                                 "151643"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert len(data["scores"]) == 2 and len(data["scores"][0]) == 2
    assert all(0 < s < 1 for row in data["scores"] for s in row)


@pytest.mark.slow
def test_score_request_file_and_text(tmp_path):
    req = tmp_path / "r.json"
    req.write_text(json.dumps({"query": "is this good?", "items": ["yes", "no"]}))
    result = runner.invoke(app, ["score", "--request", str(req), "--softmax",
                                 "--labels", "198,9834"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["scores"]
    assert len(rows) == 2 and all(sum(r) == pytest.approx(1.0, abs=1e-5) for r in rows)


@pytest.mark.parametrize("args,needle", [
    (["--query-ids", "1,2", "--item-ids", "3", "--labels", "999999999"], "label_token_ids"),
    (["--query-ids", "1,2"], "--item"),
    (["--query-ids", "1,2", "--item-ids", "3", "--engine", "tpu"], "unknown engine"),
    (["--query-ids", "1,2", "--item-ids", "3", "--option", "mask"], "key=value"),
])
def test_score_bad_input_exit_2(args, needle):
    result = runner.invoke(app, ["score", *args])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and needle in result.output
    assert "Traceback" not in result.output


def test_env_json():
    result = runner.invoke(app, ["env", "--no-peak"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["devices"]["platform"] == "cpu" and data["packages"]["jax"]


def waits(share: float):
    """A fake of the threads' run-queue clock (harness/host/peak.py `run_queue_ns`): over
    each calibration they waited for a CPU `share` of the time. Whether the machine is
    busy is faked; the matmuls are real."""
    ticks = iter(range(10**6))

    def run_queue_ns():
        k = next(ticks)
        return (int(k * 1e9 * (1 - share)), int(k * 1e9 * share))
    return run_queue_ns


@pytest.mark.slow
@pytest.mark.parametrize("share, calibrated", [(0.02, True), (0.6, False)])
def test_env_peak_is_measured_on_cpu(tmp_path, monkeypatch, share, calibrated):
    """A quiet CPU's matmul peak is measured and cached; a busy one's is refused (whatever
    the real machine's load beside the test: the wait share is faked)."""
    from mibench.harness.host import peak

    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(peak, "run_queue_ns", waits(share))
    monkeypatch.setattr(peak, "RETRY_S", 0.0)
    data = json.loads(runner.invoke(app, ["env"]).output)
    if calibrated:
        assert data["peak_source"].startswith("calibrated") and data["peak_flops"]["float32"] > 1e8
    else:
        assert data["peak_source"].startswith("unknown") and "waited for one 60%" in \
            data["peak_source"] and data["peak_flops"]["float32"] is None


def test_model_make_writes_a_checkpoint(tmp_path):
    result = runner.invoke(app, ["model", "make", "tiny", "--out", str(tmp_path / "m")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "m" / "config.json").is_file()
    bad = runner.invoke(app, ["model", "make", "no-such-preset", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and bad.output.startswith("error: ")


def test_run_bad_config_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: {path: embedded:tiny}\nwat: 1\n")
    result = runner.invoke(app, ["run", str(bad), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "wat: unknown key" in result.output
    assert "workload: required key is missing" in result.output
    assert not (tmp_path / "out").exists()

"""Tensor parallelism: every mode at tp 1, 2, 4, 8 scores like tp 1; KV heads are fitted to
the mesh; unavailable topologies are skipped; a two-process run scores like one process.
Each JAX run on simulated devices is a subprocess, since the device count is fixed at JAX
start; tp 1 (one device) scores in the test's own process."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from topology_worker import score_every_mode

from mibench.engines.config import from_hf_config
from mibench.engines.presets import PRESETS, hf_config
from mibench.engines.sharding import fit_kv_heads, kv_repeat

pytestmark = pytest.mark.slow  # subprocesses with simulated devices

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def _env(devices: int) -> dict:
    return {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
            "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}


def _worker(*args: str, devices: int = 8, timeout: int = 600) -> dict:
    out = subprocess.run([sys.executable, str(TESTS / "topology_worker.py"), *args],
                         env=_env(devices), capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_same_scores(a, b, tol=1e-5):
    a, b = np.asarray(a), np.asarray(b)
    assert np.abs(a - b).max() <= tol
    assert np.abs(np.log(a) - np.log(b)).max() <= 10 * tol


def _config(preset: str):
    return from_hf_config(hf_config(PRESETS[preset]))


def test_kv_heads_are_repeated_to_fit_the_mesh():
    tiny = _config("tiny")  # 4 query heads, 2 KV heads
    assert [kv_repeat(tiny, tp) for tp in (1, 2, 4, 8)] == [1, 1, 2, 1]
    assert all(kv_repeat(_config("tiny-kv8"), tp) == 1 for tp in (1, 2, 4, 8))
    layers = {"wk": np.arange(2 * 3 * 128, dtype=np.float32).reshape(2, 3, 128)}
    cfg, params = fit_kv_heads(tiny, {"layers": layers}, 4)
    assert cfg.num_kv_heads == 4
    heads = params["layers"]["wk"].reshape(2, 3, 4, 64)
    np.testing.assert_array_equal(heads[:, :, 0], heads[:, :, 1])  # copies of KV head 0
    np.testing.assert_array_equal(heads[:, :, 2], layers["wk"][:, :, 64:])


@pytest.mark.parametrize("preset,tps", [
    pytest.param("tiny", ("2", "4", "8"), id="tiny"),  # 2 KV heads: split, repeated, too few
    # 8 KV heads, one per chip at tp 8; at tp 2 and 4 split like tiny at tp 2: a long
    # scenario (nox -s scenarios); its small version: tiny-kv8 at tp 8 alone
    pytest.param("tiny-kv8", ("8",), id="tiny-kv8-tp8"),
    pytest.param("tiny-kv8", ("2", "4", "8"), id="tiny-kv8", marks=pytest.mark.scenario),
])
def test_every_mode_at_every_tp_scores_like_tp1(preset, tps):
    result = _worker("modes", preset, "1", *tps)
    base = result["1"]
    spread = np.ptp(np.asarray(base["single"])[:, 0])
    assert spread > 0.05, "items must score differently for the comparison to mean anything"
    assert set(result) == {"1", *tps}
    for tp in tps:
        topo = result[tp]["topology"]
        assert topo["tp"] == int(tp) and len(topo["devices"]) == int(tp)
        for label, scores in result[tp].items():
            if label not in ("topology", "kv_heads"):
                _assert_same_scores(scores, base[label])
    if preset == "tiny":  # 2 KV heads: repeated at tp 4, too few query heads at tp 8
        assert [result[tp]["kv_heads"] for tp in ("1", "2", "4", "8")] == [2, 2, 4, 2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_processes(make_cmd, timeout=600) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen(make_cmd(i), env=_env(1), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT) for i in (0, 1)]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        outs.append(subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr))
    return outs


def test_two_processes_score_like_one():
    addr = f"127.0.0.1:{_free_port()}"
    outs = _two_processes(lambda i: [sys.executable, str(TESTS / "topology_worker.py"),
                                     "process", addr, "2", str(i), "2"])
    assert all(o.returncode == 0 for o in outs), outs[0].stderr[-2000:] + outs[1].stderr[-2000:]
    assert "{" not in outs[1].stdout  # only process 0 reports (gloo may print a line)
    multi = json.loads(outs[0].stdout.strip().splitlines()[-1])["2"]
    assert {d["process"] for d in multi["topology"]["devices"]} == {0, 1}
    single = score_every_mode("tiny", 1)  # tp 1 needs one device: this process's own
    for label, scores in single.items():
        if label not in ("topology", "kv_heads"):
            _assert_same_scores(multi[label], scores)


def test_two_process_run_writes_exactly_one_artifact(tmp_path):
    addr = f"127.0.0.1:{_free_port()}"
    outs = _two_processes(lambda i: [
        sys.executable, "-m", "mibench.harness.cli", "run", "configs/cpu-smoke.yaml", "--out",
        str(tmp_path), "--coordinator", addr, "--num-processes", "2", "--process-id", str(i),
        "--set", "topology.tp=2", "--set", "runs.timed=1", "--set", "runs.warmup=0",
        "--set", "parity.checks=[modes]",
        "--set", "cases=[{engine: jax, mode: packed, mask: segment}, {engine: jax, mode: single}]"])
    assert [o.returncode for o in outs] == [0, 0], outs[0].stderr[-2000:]
    (artifact,) = list(tmp_path.glob("*.json"))
    data = json.loads(artifact.read_text())
    assert [c["status"] for c in data["cases"]] == ["ok", "ok"]
    assert data["cases"][0]["topology"]["tp"] == 2
    assert {d["process"] for d in data["cases"][0]["topology"]["devices"]} == {0, 1}
    assert data["parity"]["passed"]


# a long scenario (nox -s scenarios); its small version:
# test_every_mode_at_every_tp_scores_like_tp1
@pytest.mark.scenario
def test_topology_config_on_8_devices(tmp_path):
    """tp 1, 2, 4, 8 all ok with scores equal to tp 1; tp 16 skipped; exit 0; the report
    has the topology table."""
    run = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "run",
                          "configs/cpu-topology.yaml", "--out", str(tmp_path),
                          "--set", "runs.timed=2"],
                         env=_env(8), capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    (artifact,) = list(tmp_path.glob("*.json"))
    data = json.loads(artifact.read_text())
    by_tp: dict[int, set] = {}
    for case in data["cases"]:
        by_tp.setdefault(case["topology"]["tp"], set()).add(case["status"])
    assert by_tp == {1: {"ok"}, 2: {"ok"}, 4: {"ok"}, 8: {"ok"}, 16: {"skipped"}}
    eight = next(c for c in data["cases"] if c["topology"]["tp"] == 8)
    assert eight["topology"]["mesh_shape"] == {"tp": 8} and len(eight["topology"]["devices"]) == 8
    topo_checks = [c for c in data["parity"]["checks"] if c["check"] == "topologies"]
    assert len(topo_checks) == 15 and all(c["status"] == "passed" for c in topo_checks)
    report = subprocess.run([sys.executable, "-m", "mibench.harness.cli", "report", str(artifact),
                             "--out", str(tmp_path / "report.md")],
                            env=_env(1), capture_output=True, text=True, cwd=ROOT)
    assert report.returncode == 0, report.stderr
    text = (tmp_path / "report.md").read_text()
    assert "## Topology comparison" in text and "TP=8 items/s" in text

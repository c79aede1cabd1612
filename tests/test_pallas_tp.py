"""The pallas attention path above tp 1: the splash kernel runs per chip on its own heads
(`attention_paths.sharded`, a shard_map over the mesh). On 8 simulated CPU devices (Pallas
interpret mode) the three kernels match brute force and every mode scores like tp 1 and
like serial scoring; on a TPU slice's compile-only devices the sharded kernel compiles
where the bare one is refused. Each JAX run is a subprocess (tests/pallas_tp_worker.py),
since the simulated device count is fixed at JAX start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import example_id, mode_examples

from mibench.harness.judge.tolerances import TOL

pytestmark = pytest.mark.slow  # Pallas in interpret mode on 8 simulated devices, subprocesses

TESTS = Path(__file__).parent
ROOT = TESTS.parent
LOG_TOL = TOL["modes"]["float32"]  # a mode against serial scoring, and tp against tp 1


def _worker(*args: str, devices: int = 8, env: dict | None = None, timeout: int = 900):
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
           "HF_HUB_OFFLINE": "1", "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}", **(env or {})}
    out = subprocess.run([sys.executable, str(TESTS / "pallas_tp_worker.py"), *args], env=env,
                         capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_kernels_at_tp8_match_brute_force_per_chip():
    """16 query heads on 8 kv heads: split 2 + 1 per chip (GQA inside each chip); 4 on 2:
    tp 8 divides neither, so every chip runs every head. Causal with a key length, packed
    segments, extend against a shared prefix."""
    result = _worker("kernels", "8")
    assert set(result) == {f"{k}/{h}" for k in ("causal", "segment", "extend")
                           for h in ("16x8", "4x2")}
    for name, r in result.items():
        assert r["shard_map"], name  # the kernel runs inside a shard_map, per chip
        assert r["diff"] <= 2e-5, (name, r)
        # the control: query heads reading the wrong kv heads (n % K instead of n // G, a
        # head split that loses the GQA grouping) are far off the same output
        assert r["control"] > 1e-2, (name, r)
        split = name.endswith("16x8")
        assert r["split"] is split
        assert r["spec"] == ("P(None, None, 'tp', None)" if split else "P()"), (name, r)


def _max_log_diffs(result: dict) -> dict[str, dict[str, tuple[float, float]]]:
    """Per mode example and semantics: (max |log diff| against the same mode at tp 1,
    against serial `single` at tp 1)."""
    out = {}
    for label, by_sem in result["modes"].items():
        out[label] = {}
        for sem, scores in by_sem.items():
            got = np.asarray(scores["tp"])
            assert np.ptp(got[:, 0]) > 0.1, "items must score apart for parity to mean anything"
            out[label][sem] = (float(np.abs(got - np.asarray(scores["tp1"])).max()),
                               float(np.abs(got - np.asarray(result["single"][sem])).max()))
    return out


@pytest.mark.parametrize("preset,tp,kv_heads", [
    # 8 query and 8 kv heads: one of each per chip (nox -s scenarios; the small version:
    # tiny at tp 2 below, and test_kernels_at_tp8_match_brute_force_per_chip)
    pytest.param("tiny-kv8", 8, 8, marks=pytest.mark.scenario),
    ("tiny", 2, 2),  # 4 query heads on 2 kv heads: a GQA group per chip
    pytest.param("tiny", 8, 2, marks=pytest.mark.scenario),  # 4 heads at tp 8: not split
])
def test_every_mode_with_pallas_scores_like_tp1(preset, tp, kv_heads):
    result = _worker("modes", preset, str(tp))
    assert result["tp"] == tp and result["kv_heads"] == kv_heads
    assert result["path"] == "pallas"
    want = {example_id(m, o) for m, o in mode_examples()}
    assert set(result["modes"]) == want  # every example the registry declares
    diffs = _max_log_diffs(result)
    for label, by_sem in diffs.items():
        for sem, (vs_tp1, vs_single) in by_sem.items():
            assert vs_tp1 <= LOG_TOL and vs_single <= LOG_TOL, (label, sem, vs_tp1, vs_single)
    # the semantics are told apart: the comparison above could fail on a wrong read-out row
    single = result["single"]
    assert np.abs(np.asarray(single["plain"]) - np.asarray(single["delimited"])).max() > 1e-2


@pytest.fixture(scope="module")
def libtpu_env():
    from mibench.errors import MibenchError
    from mibench.harness.compile import libtpu
    from mibench.harness.compile.worker import worker_env

    try:
        return worker_env(libtpu.find())
    except MibenchError as e:
        pytest.skip(f"libtpu is not available and could not be installed: {e}")


@pytest.mark.parametrize("target", ["v6e-4", "v6e-8"])
def test_the_tpu_compiler_takes_the_kernel_split_by_head(libtpu_env, target):
    """Compile-only TPU devices: the sharded `keys` compiles, causal and not; the same kernel
    without the shard_map is refused (the control: on a CPU, interpret mode would run it
    unsplit and hide the problem)."""
    result = _worker("tpu", target, devices=1, env=libtpu_env)
    assert result["sharded/causal"] == result["sharded/full"] == "ok", result
    for bare in ("bare/causal", "bare/full"):
        assert "cannot be automatically partitioned" in result[bare], result

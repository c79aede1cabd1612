"""libtpu installed (the `tpu` extra) on a machine without a TPU: JAX would try its TPU
backend and libtpu would print five lines of start-up noise before every command's own
output. mibench sets `JAX_PLATFORMS=cpu` there before JAX starts (engines/platforms.py),
and leaves a TPU or GPU machine, a user's JAX_PLATFORMS and a machine without libtpu
alone. The end-to-end check needs libtpu installed (`pip install "libtpu==0.0.42.*"`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import types

import pytest

from mibench.engines import platforms
from mibench.harness.testing import write_config

CONFIG = """
name: quiet
model: {path: "embedded:tiny"}
workload: {query_tokens: 4, num_items: 2, item_tokens: 1, label_token_ids: [198]}
cases: [{engine: jax, mode: single}]
"""
NOISE = ("TPU_WORKER_HOSTNAMES", "Logging before InitGoogle", "Failed to find host bounds")


def machine(monkeypatch, libtpu=True, tpus=0, nvidia=False, amd=0):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        (types.SimpleNamespace() if libtpu else None) if name == "libtpu" else real(name, *a)))
    hw = types.SimpleNamespace(num_available_tpu_chips_and_device_id=lambda: (tpus, None),
                               has_visible_nvidia_gpu=lambda: nvidia,
                               num_available_amd_gpus=lambda stop_at=None: amd)
    monkeypatch.setattr(platforms, "_hardware_utils", lambda: hw)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)


def test_libtpu_without_a_tpu_keeps_jax_on_the_cpu(monkeypatch):
    machine(monkeypatch)
    assert platforms.skip_absent_tpu() and os.environ["JAX_PLATFORMS"] == "cpu"


@pytest.mark.parametrize("kind", [dict(tpus=4), dict(nvidia=True), dict(amd=1),
                                  dict(libtpu=False)])
def test_a_tpu_a_gpu_or_no_libtpu_is_left_to_jax(monkeypatch, kind):
    machine(monkeypatch, **kind)
    assert not platforms.skip_absent_tpu() and "JAX_PLATFORMS" not in os.environ


def test_the_users_jax_platforms_wins(monkeypatch):
    machine(monkeypatch)
    monkeypatch.setenv("JAX_PLATFORMS", "")
    assert not platforms.skip_absent_tpu() and os.environ["JAX_PLATFORMS"] == ""


def test_the_probe_reads_jaxs_own_table_without_importing_jax():
    code = ("import sys; from mibench.engines.platforms import _hardware_utils; "
            "hw = _hardware_utils(); chips, _ = hw.num_available_tpu_chips_and_device_id(); "
            "print(chips, 'jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split()[1] == "False"  # `mibench --help` stays fast


needs_libtpu = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                  reason="libtpu is not installed (the tpu extra)")


@needs_libtpu
def test_commands_print_no_libtpu_noise_on_a_machine_without_a_tpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS",
                                                            "TPU_SKIP_MDS_QUERY")}
    env["HF_HUB_OFFLINE"] = "1"
    if not platforms.absent_tpu():
        pytest.skip("this machine has a TPU or a GPU")
    # control: JAX itself, untouched, prints the noise (so this test can fail)
    bare = subprocess.run([sys.executable, "-c", "import jax; jax.devices()"], env=env,
                          capture_output=True, text=True)
    assert any(n in bare.stderr for n in NOISE), bare.stderr
    config = write_config(tmp_path, CONFIG)
    for args in (["env"], ["run", config, "--out", "/proc/mibench-out"]):
        out = subprocess.run([sys.executable, "-m", "mibench.harness.cli", *map(str, args)],
                             env=env, capture_output=True, text=True, cwd=tmp_path)
        assert not any(n in out.stderr for n in NOISE), out.stderr
    # before: five lines of libtpu, then this (the run's JAX starts before the check)
    assert out.stderr.strip() == "error: --out: cannot write in /proc/mibench-out: No such " \
                                 "file or directory"

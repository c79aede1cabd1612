"""The real sglang-jax, launched by mibench (configs/sglang-jax-cpu.yaml): opt-in, when
MIBENCH_SGLANG_JAX names the python of a venv built by ../shared/peers/setup-sglang-jax.sh
(about 15 minutes to build, 10 minutes to run here). CI does not build it; `nox -s
sglang_jax` runs this test and the config where it is installed.

At 1 running request sglang-jax matches the torch reference and is concurrency invariant;
at 16 its scores can move (a race in its batching while new shapes compile: on this CPU
about one launch in two), so the test asserts what must hold, and that whatever moved is
named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mibench.harness.config import load_config
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run

ROOT = Path(__file__).resolve().parents[1]
PYTHON = os.environ.get("MIBENCH_SGLANG_JAX")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not PYTHON or not Path(PYTHON).is_file(),
    reason="MIBENCH_SGLANG_JAX is not the python of an sglang-jax venv")]


def test_sglang_jax_config_runs_judges_and_leaves_nothing_running(tmp_path):
    config = load_config(ROOT / "configs" / "sglang-jax-cpu.yaml")
    record = run(plan_of(config, out=tmp_path, progress=False))
    low, high = record.cases
    assert "max_running_requests=1/" in low.case_id and "=16/" in high.case_id
    assert low.status == high.status == "ok", [c.error for c in record.cases]
    for case in (low, high):
        assert case.server.package == "sglang-jax" and case.server.package_version
        assert case.server.reported.get("version") and case.server.startup_s > 0
        assert case.http.ok == case.http.sent > 0
    checks = {(c.check, c.case_id.split("/")[3]): c for c in record.parity.checks}
    assert checks[("engines", "max_running_requests=1")].status == "passed"
    assert checks[("concurrency", "max_running_requests=1")].status == "passed"
    for check in ("engines", "concurrency"):
        found = checks[(check, "max_running_requests=16")]
        assert found.status in ("passed", "failed")
        if check == "concurrency" and found.status == "failed":
            assert found.moved and found.moved[0].startswith("request ")
    leftover = [p for p in Path("/proc").iterdir() if p.name.isdigit()
                and b"sgl_jax" in _cmdline(p) and str(tmp_path).encode() not in _cmdline(p)]
    assert not [p for p in leftover if b"launch_server" in _cmdline(p)]


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""

"""A config's time on this machine at the least, before it runs (harness/run/estimate.py):
each case's pass FLOPs x its calls / the cached peak, shown by `validate` and `run`, the
warning for a config made for another machine, and "unknown" (never a calibration, never a
made-up number) when no peak is cached."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import mibench.engines
from mibench.engines import model_facts
from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.host import peak as peak_mod
from mibench.harness.run import estimate as est
from mibench.harness.testing import write_config

SMALL = """
name: small
model: {path: "embedded:tiny"}
workload: {query_tokens: 16, num_items: 4, item_tokens: 4, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 2}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed, mask: segment, runs: {timed: 4}}
  - {engine: torch, mode: single}
  - {engine: http, mode: single, base_url: "http://127.0.0.1:9", clients: 1}
"""
# v6e1's first case (Qwen3-0.6B, a 2000-token query, 64 items, single): hours on a CPU
BIG = """
name: big
model: {path: "embedded:qwen3-0.6b", dtype: bfloat16}
workload: {query_tokens: 2000, num_items: 500, item_tokens: 20, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 5}
cases:
  - {engine: jax, mode: single, workload: {num_items: 64}}
"""


def cases_of(tmp_path, text, sets=()):
    config = load_config(write_config(tmp_path, text), list(sets))
    return config, expand(config)


def test_a_case_is_its_pass_flops_times_its_calls_over_the_peak(tmp_path):
    _, cases = cases_of(tmp_path, SMALL)
    found = est.estimate(cases, lambda dtype: 1e9, model_facts)
    single, packed, torch, http = found
    flops, _ = est.pass_flops(cases[0], model_facts)
    assert single.seconds == pytest.approx(flops * (1 + 1 + 2) / 1e9)
    assert est.case_calls(cases[1]) == 6  # its own runs: 1 + 1 + 4
    assert torch.seconds == pytest.approx(single.seconds)  # the same mode's work
    assert http.seconds is None and http.why == "a server's case"
    assert est.total(found) == pytest.approx(single.seconds + packed.seconds + torch.seconds)
    half = est.estimate(cases, lambda dtype: 2e9, model_facts)
    assert half[1].seconds == pytest.approx(packed.seconds / 2)
    unknown = est.estimate(cases, lambda dtype: None, model_facts)
    assert all(e.seconds is None for e in unknown) and est.total(unknown) is None
    assert unknown[0].why == "no float32 peak"
    assert est.summary(unknown, "x").startswith("time here: unknown (a server's case; no "
                                                "float32 peak)")


def test_the_warning_names_the_config_the_time_and_what_to_run_instead(tmp_path):
    _, big = cases_of(tmp_path, BIG)
    found = est.estimate(big, lambda dtype: 1.6e11, model_facts)
    assert est.total(found) > est.WARN_S
    line = est.warning("big", "configs/big.yaml", found, None, {})
    assert line.startswith("warning: configs/big.yaml (big) is made for another machine: "
                           "would take ≥ ")
    assert "configs/cpu.yaml" in line and "--set runs.timed=1" in line and "\n" not in line
    _, small = cases_of(tmp_path, SMALL)
    quick = est.estimate(small, lambda dtype: 1.6e11, model_facts)
    assert est.warning("small", "s.yaml", quick, None, {}) is None
    # a TPU target on a machine without one: said even when quick, or with no estimate
    assert "topology.target is v6e-1 and this machine has no TPU" in est.warning(
        "small", "s.yaml", quick, "v6e-1", {})
    assert est.warning("small", "s.yaml", quick, "v6e-1", {"tpu": 1}) is None
    assert "its time here is unknown" in est.warning("small", "s.yaml",
                                                     est.estimate(small, lambda d: None,
                                                                  model_facts), "v6e-1", {})


@pytest.fixture
def cpu_only(tmp_path, monkeypatch):
    """A machine without TPU or GPU, its peak cache empty; a calibration would fail."""
    monkeypatch.setattr(mibench.engines, "accelerators", lambda: {}, raising=False)
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))

    def no_calibration(dtype):
        raise AssertionError("validate must not calibrate")
    monkeypatch.setattr(peak_mod, "calibrate_cpu", no_calibration)


def test_validate_shows_each_case_and_the_total_or_says_unknown(tmp_path, cpu_only,
                                                                 monkeypatch):
    path = write_config(tmp_path, SMALL)
    out = CliRunner().invoke(app, ["validate", str(path)])
    assert out.exit_code == 0, out.output
    assert "time here" in out.stdout.splitlines()[1]  # the table's column
    assert "time here: unknown (a server's case; no float32 peak)" in out.stdout
    # once a run (or `mibench env`) cached the peak, validate uses it
    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: 1e9)
    peak_mod.cached_cpu_peak("float32")
    out = CliRunner().invoke(app, ["validate", str(path)])
    rows = [line for line in out.stdout.splitlines() if "jax/single/tp=1" in line]
    assert "≥ 0:" in rows[0], rows
    summary = next(line for line in out.stdout.splitlines() if line.startswith("time here:"))
    assert summary.startswith("time here: ≥ ") and "1 case(s) not estimated" in summary
    assert "float32 1e+09 FLOP/s, calibrated" in summary and "warning" not in out.stdout


def test_validate_and_run_warn_before_a_config_for_another_machine(tmp_path, cpu_only,
                                                                   monkeypatch):
    from mibench.harness.run import plan as plan_module
    from mibench.harness.testing import fake_factory, fixed_peak

    monkeypatch.setattr(peak_mod, "calibrate_cpu", lambda dtype: 1.6e11)
    peak_mod.cached_cpu_peak("bfloat16")
    path = write_config(tmp_path, BIG.replace("timed: 5", "timed: 3"), "big.yaml")
    out = CliRunner().invoke(app, ["validate", str(path)])
    assert out.stdout.startswith(f"warning: {path} (big) is made for another machine: "
                                 "would take ≥ ")
    make = plan_module.make_plan
    monkeypatch.setattr(plan_module, "make_plan", lambda *a, **kw: make(
        *a, **kw, engine_factory=fake_factory(), peak=fixed_peak()))
    run = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out"),
                                   "--progress", "lines"])
    assert run.exit_code == 0, run.output
    err = run.stderr.splitlines()
    assert err[0].startswith(f"warning: {path} (big) is made for another machine")
    assert err[1].startswith("time here   ≥ ") and err[1].endswith("jax/single/tp=1/items=64")
    assert err[2].startswith("time here: ≥ ") and err[3].startswith("[1/1] jax/single")
    quiet = CliRunner().invoke(app, ["run", str(path), "--out", str(tmp_path / "out"),
                                     "--progress", "none"])
    assert quiet.stderr.splitlines()[0].startswith("warning: ")  # said even then
    assert len(quiet.stderr.splitlines()) == 1

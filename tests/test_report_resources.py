"""The report's compiles and memory: first-call, warmup and timed compile counts ("not
counted" where none were taken, never 0), a mark and a footnote on a case that compiled
during its timed runs, and `mibench compile`'s HBM estimate beside the measured peak
(`mibench report RUN.json --compile COMPILE.json`), saying when the target is not the run's
hardware."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.records import read_artifact, read_compile_artifact, write_artifact
from mibench.harness.report import build_context, render
from mibench.harness.report.resources import TIMED_MARK

DATA = Path(__file__).parent / "data"
RUN = DATA / "reports" / "base.json"  # TPU v6 lite x4, qwen3-0.6b, no compile counts
COMPILED = DATA / "compile-tiny-v6e-1.json"  # v6e-1, embedded:tiny
CASE = "jax/packed/mask=dense/tp=1"


def cli(*args: str):
    return CliRunner().invoke(app, ["report", *args])


@pytest.fixture(scope="module")
def run():
    return read_artifact(RUN)


def counted(run, case_id: str = CASE, **counts):
    out = run.model_copy(deep=True)
    for c in out.cases:
        if c.case_id == case_id:
            c.metrics = c.metrics.model_copy(update=counts)
    return out


def section(text: str) -> str:
    return text.split("## Compiles and memory", 1)[1].split("\n## ", 1)[0]


def cells(text: str, case_id: str) -> list[str]:
    line = next(x for x in section(text).splitlines() if x.startswith(f"| {case_id} |"))
    return [c.strip() for c in line.strip("|").split("|")]


def test_no_counts_and_no_estimates_leave_the_section_out(run):
    assert "## Compiles and memory" not in render(build_context([run]))


def test_counts_shown_and_not_counted_never_zero(run):
    rec = counted(run, first_call_compiles=7, warmup_compiles=0, timed_compiles=0)
    text = render(build_context([rec]))
    assert cells(text, CASE)[1:6] == ["7", "0", "0", "2.3 GiB", "device"]
    assert cells(text, "jax/single/tp=1")[1:4] == ["not counted"] * 3
    assert TIMED_MARK not in text  # no compile during a timed run: no mark, no footnote


def test_a_timed_compile_marks_the_case_with_a_footnote(run):
    rec = counted(run, first_call_compiles=7, warmup_compiles=1, timed_compiles=2)
    text = render(build_context([rec]))
    assert cells(text, CASE)[3] == f"**2** {TIMED_MARK}"
    matrix = text.split("## Results matrix", 1)[1].split("\n## ", 1)[0]
    assert f"ok {TIMED_MARK}" in matrix and f"{TIMED_MARK} XLA compiled during" in matrix
    assert f"{TIMED_MARK} XLA compiled during the case's timed runs" in section(text)
    assert f"1 case(s) compiled during their timed runs ({TIMED_MARK}): {CASE} (2)" in text


def test_estimate_beside_the_peak_says_the_target_differs(tmp_path):
    out = cli(str(RUN), "--compile", str(COMPILED))
    assert out.exit_code == 0, out.output
    row = cells(out.stdout, CASE)
    assert row[4] == "2.3 GiB"  # measured
    assert row[7].startswith("80.2 MiB on v6e-1 (not this run's hardware (TPU v6 lite x4)")
    assert "another workload" in row[7] and "another model" in row[7]
    assert row[8] == "-"  # no ratio of different measurements
    assert "HBM estimate (mibench compile)" in section(out.stdout)


def test_estimate_on_the_same_hardware_gives_the_ratio(run):
    compiled = read_compile_artifact(COMPILED)
    est = next(c for c in compiled.cases if c.case_id == CASE)
    rec = run.model_copy(deep=True)
    rec.provenance.devices.count = 1
    for c in rec.cases:
        c.model, c.workload = est.model.model_copy(), est.workload.model_copy()
    text = render(build_context([rec], compiles=[compiled]))
    row = cells(text, CASE)
    assert row[7] == "80.2 MiB on v6e-1"
    assert row[8] == f"{2_500_000_000 / est.compile.hbm_peak_bytes:.2f}x"
    assert row[9] == row[10] == "-"  # the stored compile artifact predates the roofline
    # the dense mask's host->device bytes per pass: 128 x 128 booleans, as compile counted
    host = est.compile.host.to_device_by_argument["packed_dense_forward.mask_btt"]
    assert row[6] == "16.0 KiB" and host == 128 * 128
    assert cells(text, "jax/packed/mask=segment/tp=1")[6] == "-"
    # with a roofline, the median run's share of it
    from mibench.harness.compile.roofline import bound

    target = compiled.target.model_copy(update={"peak_flops_per_chip": 918e12,
                                                "hbm_bandwidth_per_chip": 1638e9})
    est.compile.roofline = bound(1e9, 1638e9 * 0.01, 0.0, 6, target)  # 600 items/s, memory
    row = cells(render(build_context([rec], compiles=[compiled])), CASE)
    thr = next(c for c in rec.cases if c.case_id == CASE).metrics.throughput_items_per_s.median
    assert row[9] == "600.00 (memory)" and row[10] == f"{thr / 600:.1%}"
    # a case the compile artifact lacks says so; a skipped one its status
    assert cells(text, "jax/chunked/chunk_size=32/tp=1")[7] == "no estimate"
    assert cells(text, "torch/single/tp=1")[7] == "skipped on v6e-1"


def test_compile_option_takes_only_compile_artifacts(tmp_path):
    out = cli(str(RUN), "--compile", str(RUN))
    assert out.exit_code == 2 and out.stderr.count("\n") == 1
    assert str(RUN) in out.stderr and "not a mibench.compile/2 artifact" in out.stderr
    out = cli(str(COMPILED), "--compile", str(COMPILED))
    assert out.exit_code == 2 and "--compile" in out.stderr
    missing = tmp_path / "missing.json"  # named as missing, not as another kind of artifact
    out = cli(str(RUN), "--compile", str(missing))
    assert out.exit_code == 2 and f"{missing}: no such artifact" in out.stderr


def test_cli_report_of_a_counted_run(run, tmp_path):
    path = tmp_path / "run.json"
    write_artifact(counted(run, first_call_compiles=3, timed_compiles=1), path)
    out = cli(str(path))
    assert out.exit_code == 0 and f"**1** {TIMED_MARK}" in out.stdout

"""`mibench compare` judges more than time: compiles during the timed runs fail a case (and
counts not taken say "not counted", never 0), and a case's own peak memory is compared like
its time (+ = larger) only between own peaks of one kind, the reason shown otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.judge.compare import compare
from mibench.harness.judge.memory import memory_check
from mibench.harness.records import RunRecord, read_artifact, write_artifact
from mibench.harness.report.changes import compare_markdown

DATA = Path(__file__).parent / "data" / "reports"
CASE = "jax/packed/mask=segment/tp=1"


def cli(*args: str):
    return CliRunner().invoke(app, ["compare", *args])


@pytest.fixture(scope="module")
def base() -> RunRecord:
    return read_artifact(DATA / "base.json")


def edited(rec: RunRecord, case_id: str = CASE, **metrics) -> RunRecord:
    """A copy whose case `case_id` has these metrics replaced."""
    out = rec.model_copy(deep=True)
    for c in out.cases:
        if c.case_id == case_id:
            c.metrics = c.metrics.model_copy(update=metrics)
    return out


def row(comp, case_id: str = CASE):
    return next(c for c in comp.cases if c.case_id == case_id)


def save(rec: RunRecord, path: Path) -> str:
    write_artifact(rec, path)
    return str(path)


# --- compiles during the timed runs ------------------------------------------------------


def test_timed_compiles_fail_the_case_and_zero_passes(base, tmp_path):
    bad = edited(base, timed_compiles=3, first_call_compiles=12)
    comp = compare(base, bad)
    c = row(comp)
    assert c.verdict == "timed compiles" and c.regression and c.timed_compiles == 3
    assert c.reason.startswith("3 XLA compilation(s) during the timed runs")
    assert comp.outcome == "regression" and comp.exit_code == 1
    out = cli(str(DATA / "base.json"), save(bad, tmp_path / "bad.json"), "--allow-untested")
    assert out.exit_code == 1, out.output
    assert f"{CASE}: 3 XLA compilation(s) during the timed runs" in out.stdout  # verdict line
    data = json.loads(cli(str(DATA / "base.json"), str(tmp_path / "bad.json"),
                          "--allow-untested", "--format", "json").stdout)
    (case,) = [c for c in data["cases"] if c["case_id"] == CASE]
    assert case["verdict"] == "timed compiles" and case["timed_compiles"] == 3
    assert data["schema"] == "mibench.compare/3" and data["exit_code"] == 1
    # control: zero compiles in the timed runs passes
    good = edited(base, timed_compiles=0, first_call_compiles=12)
    assert row(compare(base, good)).verdict != "timed compiles"
    assert compare(base, good, allow_untested=True).outcome == "pass"
    out = cli(str(DATA / "base.json"), save(good, tmp_path / "good.json"), "--allow-untested")
    assert out.exit_code == 0, out.output


def test_timed_compiles_fail_an_added_case(base):
    """A case the baseline lacks is not compared, but its compiles still fail it."""
    bad = edited(base, timed_compiles=1)
    bad.cases[2].case_id = "jax/packed/mask=segment/tp=1/new"
    c = row(compare(base, bad), "jax/packed/mask=segment/tp=1/new")
    assert c.verdict == "timed compiles" and c.regression and c.base_status is None


def test_compiles_not_counted_say_so(base):
    """The fixtures hold no counts (None): "not counted", never 0."""
    assert all(c.metrics.timed_compiles is None for c in base.cases)
    text = compare_markdown(compare(base, edited(base, timed_compiles=0)))
    assert "| not counted |" in text and "| 0 |" in text  # one counted case among None
    lifted = compare_markdown(compare(base, base))
    assert "Timed compiles: not counted" in lifted


# --- peak memory ---------------------------------------------------------------------------


def test_memory_regression_past_the_threshold_not_below(base, tmp_path):
    peak = next(c for c in base.cases if c.case_id == CASE).metrics.peak_memory_bytes
    grown = edited(base, peak_memory_bytes=int(peak * 1.2))
    c = row(compare(base, grown, allow_untested=True))
    assert c.memory.ratio == pytest.approx(1.2) and c.memory.regression
    assert c.verdict == "memory regression" and c.regression
    assert c.memory.base_bytes == peak and c.memory.new_bytes == int(peak * 1.2)
    text = compare_markdown(compare(base, grown))
    assert "**2.3 GiB -> 2.8 GiB (+20.0%, 1.20x)**" in text
    out = cli(str(DATA / "base.json"), save(grown, tmp_path / "grown.json"), "--allow-untested")
    assert out.exit_code == 1 and f"{CASE}: peak memory (device) +20.0%" in out.stdout
    data = json.loads(cli(str(DATA / "base.json"), str(tmp_path / "grown.json"),
                          "--allow-untested", "--format", "json").stdout)
    (case,) = [c for c in data["cases"] if c["case_id"] == CASE]
    assert case["verdict"] == "memory regression" and data["memory_threshold"] == 0.10
    assert case["memory"]["ratio"] == pytest.approx(1.2) and case["memory"]["regression"]
    assert case["memory"]["base_bytes"] == peak and case["memory"]["new_source"] == "device"
    # a looser threshold, and growth below the default, pass
    out = cli(str(DATA / "base.json"), str(tmp_path / "grown.json"), "--allow-untested",
              "--threshold", "memory=25%")
    assert out.exit_code == 0, out.output
    small = row(compare(base, edited(base, peak_memory_bytes=int(peak * 1.05))))
    assert small.memory.ratio == pytest.approx(1.05) and not small.memory.regression
    assert small.verdict != "memory regression"
    shrunk = row(compare(base, edited(base, peak_memory_bytes=int(peak * 0.5))))
    assert shrunk.memory.change == pytest.approx(-0.5) and not shrunk.regression


def test_memory_is_not_compared_across_kinds(base):
    peak = 2 * next(c for c in base.cases if c.case_id == CASE).metrics.peak_memory_bytes
    for source, why in (("rss-rise", "different kinds of peak: device (baseline) vs rss-rise"),
                        ("device-bound", "the new peak is device-bound: an upper bound"),
                        ("rss", "the new peak is rss: the process's resident set")):
        c = row(compare(base, edited(base, peak_memory_bytes=peak, peak_memory_source=source)))
        assert c.memory.ratio is None and not c.memory.regression, source
        assert c.verdict != "memory regression" and why in c.memory.note, c.memory.note
        text = compare_markdown(compare(base, edited(base, peak_memory_bytes=peak,
                                                     peak_memory_source=source)))
        assert f"not compared: {why}" in text
    c = row(compare(base, edited(base, peak_memory_bytes=None, peak_memory_source=None)))
    assert "the new peak was not recorded" in c.memory.note


def rss_rise(case, mib: float):
    out = case.model_copy(deep=True)
    out.metrics = out.metrics.model_copy(update=dict(peak_memory_bytes=int(mib * 2**20),
                                                     peak_memory_source="rss-rise"))
    return out


def test_memory_check_of_own_cpu_peaks(base):
    """Two resident-set rises (CPU) are one kind: compared; growth within a rise's noise in
    bytes (measured: 0.03 vs 0.29 MiB, 29.9 vs 39.1 MiB of one case) is not a regression."""
    case = base.cases[0]
    check = memory_check(rss_rise(case, 100), rss_rise(case, 140), 0.10)
    assert check.regression and check.change == pytest.approx(0.4)
    assert check.note == "peak memory (rss-rise) +40.0%: grew by more than 10%"
    assert not memory_check(rss_rise(case, 100), rss_rise(case, 140), 0.5).regression
    for a, b in ((0.03, 0.29), (29.9, 39.1)):
        noisy = memory_check(rss_rise(case, a), rss_rise(case, b), 0.10)
        assert noisy.change > 0.10 and not noisy.regression
        assert "within the noise" in noisy.note

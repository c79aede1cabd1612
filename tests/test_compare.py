"""`mibench compare`: the regression gate on fixed artifacts (tests/data/reports) and edits
of them, the false-positive rate on noise, and one-line errors with exit 2."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import typer
from typer.testing import CliRunner

from mibench.harness.records import ErrorInfo, read_artifact, write_artifact
from mibench.harness.report.commands import compare as compare_cmd
from mibench.harness.report.commands import parse_threshold
from mibench.harness.stats.compare import compare
from mibench.harness.stats.significance import BOOTSTRAP, MWU, compare_samples

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

CHUNKED = "jax/chunked/chunk_size=32/tp=4"


def cli(*args: str):
    app = typer.Typer()
    app.command()(compare_cmd)
    app.command("noop")(lambda: None)  # with two commands typer keeps the command name
    return CliRunner().invoke(app, ["compare", *args])


@pytest.fixture(scope="module")
def base():
    return read_artifact(DATA / "base.json")


@pytest.fixture(scope="module")
def new():
    return read_artifact(DATA / "new.json")


def test_artifact_against_itself_is_no_regression(base):
    result = compare(base, base)
    assert not result.regression
    assert {c.verdict for c in result.cases} <= {"unchanged", "still failing", "skipped"}
    assert result.warnings == []


def test_fixed_pair_improvement_is_no_regression(base, new):
    result = compare(base, new)
    assert not result.regression
    seg = next(c for c in result.cases if c.case_id == "jax/packed/mask=segment/tp=1")
    assert seg.verdict == "improvement" and seg.test.method == MWU


def test_half_throughput_in_one_case_is_a_regression(new, tmp_path):
    slow = make.scaled(new, CHUNKED, 2.0)  # twice the time: 50% fewer items/s
    result = compare(new, slow)
    bad = [c for c in result.cases if c.regression]
    assert [c.case_id for c in bad] == [CHUNKED]
    assert bad[0].change == pytest.approx(-0.5, abs=0.01)
    assert bad[0].test.significant and bad[0].test.method == MWU
    write_artifact(slow, tmp_path / "slow.json")
    out = cli(str(DATA / "new.json"), str(tmp_path / "slow.json"))
    assert out.exit_code == 1, out.output
    assert "REGRESSION" in out.output and CHUNKED in out.output


def test_small_change_or_few_runs_is_not_a_regression(new):
    assert not compare(new, make.scaled(new, CHUNKED, 1.03)).regression  # under 5%
    single = compare(new, make.scaled(new, "jax/single/tp=1", 2.0))  # 1 run each: untestable
    case = next(c for c in single.cases if c.case_id == "jax/single/tp=1")
    assert not single.regression and case.verdict == "untested"
    assert any("not testable" in w for w in single.warnings)


def test_samples_are_compared_per_item(new):
    """Half the items in half the time is the same speed, not a faster case."""
    other = new.model_copy(deep=True)
    case = next(c for c in other.cases if c.case_id == CHUNKED)
    case.workload["num_items"] = 250
    make.set_times(case, [t / 2 for t in case.timed_s])
    change = next(c for c in compare(new, other).cases if c.case_id == CHUNKED)
    assert change.verdict == "unchanged" and change.test.p_value > 0.5


@pytest.mark.parametrize("runs", [5, 3])
def test_noise_flags_at_most_5_percent_of_100_pairs(base, runs):
    """100 pairs of samples from one distribution (10% noise): at most 5 regressions."""
    rng = np.random.default_rng(1234 + runs)
    case = next(c for c in base.cases if c.case_id == CHUNKED)
    flagged, methods = 0, set()
    for _ in range(100):
        a, b = base.model_copy(deep=True), base.model_copy(deep=True)
        for rec in (a, b):
            c = next(c for c in rec.cases if c.case_id == CHUNKED)
            make.set_times(c, (case.metrics.total_s.median *
                               (1 + 0.1 * rng.standard_normal(runs))).tolist())
        result = compare(a, b)
        flagged += result.regression
        methods |= set(result.methods)
    assert flagged <= 5
    assert (MWU if runs == 5 else BOOTSTRAP) in methods


def test_newly_failed_case_is_a_regression(new):
    broken = new.model_copy(deep=True)
    case = next(c for c in broken.cases if c.case_id == CHUNKED)
    case.status = "failed"
    case.error = ErrorInfo(type="ValueError", message="do not evenly divide\nmore", traceback="")
    result = compare(new, broken)
    bad = [c for c in result.cases if c.regression]
    assert [c.case_id for c in bad] == [CHUNKED] and bad[0].verdict == "failed"
    assert "ValueError: do not evenly divide" in bad[0].reason


def test_cases_missing_from_an_unfinished_run_are_regressions(new):
    partial = new.model_copy(deep=True)
    partial.cases, partial.finished_at = partial.cases[:3], None
    result = compare(new, partial)
    missing = [c for c in result.cases if c.verdict == "missing"]
    assert result.regression and len(missing) == 13
    assert [c.regression for c in missing].count(True) == 10  # ok in the baseline
    partial.finished_at = new.finished_at  # a finished run with fewer cases: warnings only
    assert not compare(new, partial).regression


def test_parity_check_that_now_fails_is_a_regression(new):
    broken = new.model_copy(deep=True)
    broken.parity.checks[0].status = "failed"
    broken.parity.checks[0].max_abs_diff = 0.5
    result = compare(new, broken)
    assert result.regression
    assert [p.regression for p in result.parity].count(True) == 1
    assert not compare(broken, broken).regression  # failing in both: not a new regression


def test_warnings_for_hardware_packages_config_and_cases(new):
    other = new.model_copy(deep=True)
    other.provenance.devices.kind = "TPU v5 lite"
    other.provenance.packages["jax"] = "0.9.0"
    other.config_sha256 = "0" * 64
    other.config["runs"] = {"warmup": 0, "timed": 5}
    other.cases = other.cases[1:]
    warnings = "\n".join(compare(new, other).warnings)
    for text in ("hardware differs", "jax 0.8.1 -> 0.9.0", "config differs in: runs",
                 "jax/single/tp=1 is in the baseline but not in the new"):
        assert text in warnings


def test_json_format_names_the_methods():
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), "--format", "json")
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["schema"] == "mibench.compare/1" and data["regression"] is False
    assert MWU in data["methods"] and len(data["cases"]) == 16


def test_markdown_output_says_which_test():
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), "--threshold", "10%")
    assert out.exit_code == 0
    assert "Mann-Whitney U" in out.output and "larger than 10%" in out.output


def test_thresholds():
    assert parse_threshold("5%") == parse_threshold("0.05") == parse_threshold("5") == 0.05


def test_significance_methods_by_sample_size():
    assert compare_samples([1.0] * 4, [2.0] * 4).method == MWU
    assert compare_samples([1.0, 1.01, 0.99], [2.0, 2.02, 1.98]).method == BOOTSTRAP
    assert compare_samples([1.0, 1.01, 0.99], [2.0, 2.02, 1.98]).significant
    assert not compare_samples([1.0], [2.0]).significant


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "text.json").write_text("not json")
    (tmp_path / "schema.json").write_text(json.dumps({"schema": "mibench.run/9"}))
    (tmp_path / "invalid.json").write_text(json.dumps({"schema": "mibench.run/1"}))
    (tmp_path / "binary.json").write_bytes(b"\xff\xfe\x00\x81")
    return {"missing": tmp_path / "nope.json", "folder": tmp_path,
            **{p.stem: p for p in tmp_path.glob("*.json")}}


@pytest.mark.parametrize("kind", ["missing", "folder", "text", "schema", "invalid", "binary"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, kind):
    bad = _bad_files(tmp_path)[kind]
    out = cli(str(DATA / "base.json"), str(bad))
    assert out.exit_code == 2
    lines = out.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and str(bad) in lines[0]
    assert "Traceback" not in out.output


@pytest.mark.parametrize("option", [["--threshold", "x"], ["--threshold", "150%"],
                                    ["--format", "xml"]])
def test_bad_options_exit_2(option):
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), *option)
    assert out.exit_code == 2 and out.output.startswith("error: ")


# --- a real artifact (`mibench run configs/cpu-smoke.yaml` on the 2-core machine), edited ---

REAL = DATA / "real-smoke.json"
REAL_CASE = "jax/chunked/chunk_size=4/tp=1"


def test_real_artifact_against_itself_exits_0():
    out = cli(str(REAL), str(REAL))
    assert out.exit_code == 0, out.output
    assert "No regression." in out.output


def test_real_artifact_with_half_throughput_exits_1(tmp_path):
    real = read_artifact(REAL)
    write_artifact(make.scaled(real, REAL_CASE, 2.0), tmp_path / "slow.json")
    out = cli(str(REAL), str(tmp_path / "slow.json"), "--format", "json")
    assert out.exit_code == 1, out.output
    data = json.loads(out.output)
    bad = [c for c in data["cases"] if c["regression"]]
    assert [c["case_id"] for c in bad] == [REAL_CASE]
    assert bad[0]["test"]["method"] == BOOTSTRAP  # 3 timed runs: too few for Mann-Whitney


def test_real_artifact_with_a_newly_failed_case_exits_1(tmp_path):
    real = read_artifact(REAL)
    case = next(c for c in real.cases if c.case_id == REAL_CASE)
    case.status = "failed"
    case.error = ErrorInfo(type="XlaRuntimeError", message="RESOURCE_EXHAUSTED: out of memory",
                           traceback="...")
    write_artifact(real, tmp_path / "failed.json")
    out = cli(str(REAL), str(tmp_path / "failed.json"))
    assert out.exit_code == 1 and "newly failed: XlaRuntimeError" in out.output

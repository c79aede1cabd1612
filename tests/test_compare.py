"""`mibench compare`: the regression gate on fixed artifacts (tests/data/reports) and edits
of them: like with like, figures from the raw samples, between-run noise, scores, untested
cases, invalid artifacts, rebaselining, and one-line errors with exit 2."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.commands.common import parse_threshold
from mibench.harness.judge.compare import compare
from mibench.harness.judge.noise import aa_noise
from mibench.harness.records import (
    CaseLoad,
    ErrorInfo,
    RunRecord,
    TopologyRecord,
    read_artifact,
    write_artifact,
)
from mibench.harness.report.fmt import verdict_line
from mibench.harness.stats.significance import METHOD, NoiseFloor, between_runs
from mibench.harness.testing import error_line

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

CHUNKED = "jax/chunked/chunk_size=32/tp=4"
REAL = DATA / "real-smoke.json"  # `mibench run configs/cpu-smoke.yaml` on the 2-core machine
REAL_CASE = "jax/chunked/chunk_size=4/tp=1"


def cli(*args: str):
    return CliRunner().invoke(app, ["compare", *args])


def save(rec: RunRecord, path: Path) -> str:
    write_artifact(rec, path)
    return str(path)


def drifted(rec: RunRecord, factor: float, case_id: str | None = None) -> RunRecord:
    """A copy whose ok cases (or only `case_id`) take `factor` times as long."""
    out = rec.model_copy(deep=True)
    for c in out.cases:
        if c.status == "ok" and case_id in (None, c.case_id):
            make.set_times(c, [t * factor for t in c.timed_s])
    return out


@pytest.fixture(scope="module")
def base():
    return read_artifact(DATA / "base.json")


@pytest.fixture(scope="module")
def new():
    return read_artifact(DATA / "new.json")


@pytest.fixture(scope="module")
def real():
    return read_artifact(REAL)


# --- the fixed TPU-shaped pair (older artifacts: no scores, `single` timed once) ---------


def test_artifact_against_itself_is_untested_then_passes_when_allowed(base):
    result = compare(base, base)
    assert not result.regression and result.outcome == "untested"  # jax/single: 1 run
    assert {c.case_id for c in result.untested} == {"jax/single/tp=1", "jax/single/tp=4"}
    # no change at all, but the TPU floor's interval (about +-11%) reaches beyond 5%
    assert {c.verdict for c in result.cases} <= {"inconclusive", "still failing", "skipped",
                                                 "untested"}
    assert all(c.latency_change == 0 and c.latency_low < -0.05 for c in result.compared
               if c.verdict == "inconclusive")
    assert compare(base, base, allow_untested=True).exit_code == 0
    assert all(c.scores.note.startswith("scores not compared") for c in result.compared)


def test_ten_percent_faster_is_inconclusive_at_the_tpu_floor_and_an_improvement_at_1_percent(
        base, new):
    seg = "jax/packed/mask=segment/tp=1"
    result = compare(base, new, allow_untested=True)
    assert result.floor.value == 0.03 and "tpu" in result.floor.source
    change = next(c for c in result.cases if c.case_id == seg)
    assert change.verdict == "inconclusive" and change.latency_low < 0 < change.latency_high
    assert "`mibench ab`" in change.reason and "runs.processes" in change.reason
    assert change.items_per_s_change == pytest.approx(0.104, abs=0.002)
    # one convention: time new / base - 1, + = slower; the items/s fields keep theirs
    assert change.latency_change == pytest.approx(1 / 1.104 - 1, abs=0.002)
    assert change.latency_low == pytest.approx(1 / (1 + change.items_per_s_high) - 1)
    assert change.new_ms_per_item / change.base_ms_per_item - 1 == pytest.approx(
        change.latency_change)
    tight = compare(base, new, floor=NoiseFloor(0.01, "--noise-floor"))
    change = next(c for c in tight.cases if c.case_id == seg)
    assert change.verdict == "improvement" and change.items_per_s_low > 0.05
    assert change.latency_high < -0.05


def test_half_throughput_in_one_case_is_a_regression(new, tmp_path):
    slow = drifted(new, 2.0, CHUNKED)  # twice the time: 50% fewer items/s
    result = compare(new, slow)
    bad = [c for c in result.cases if c.regression]
    assert [c.case_id for c in bad] == [CHUNKED] and result.exit_code == 1
    assert bad[0].items_per_s_change == pytest.approx(-0.5, abs=0.01)
    assert bad[0].items_per_s_high < -0.05 and bad[0].latency_low > 0.05
    assert bad[0].test.method == METHOD and bad[0].test.significant
    out = cli(str(DATA / "new.json"), save(slow, tmp_path / "slow.json"))
    assert out.exit_code == 1, out.output
    verdict = out.stdout.splitlines()[2]
    assert verdict.startswith("**REGRESSION** against 22222222") and CHUNKED in verdict
    assert "time +100.0% [" in verdict and "99% interval, noise floor 3%" in verdict


def test_small_change_is_not_a_regression_and_one_run_is_untested(new):
    assert not compare(new, drifted(new, 1.03, CHUNKED)).regression
    single = compare(new, drifted(new, 2.0, "jax/single/tp=1"))
    case = next(c for c in single.cases if c.case_id == "jax/single/tp=1")
    assert not single.regression and case.verdict == "untested" and single.exit_code == 1
    assert "1+1 timed runs" in case.reason
    assert case.items_per_s_change == pytest.approx(-0.5, abs=0.01)


@pytest.mark.parametrize("runs", [5, 3])
def test_noise_flags_at_most_5_percent_of_100_pairs(base, runs):
    """100 pairs of samples from one distribution (10% noise): at most 5 regressions."""
    rng = np.random.default_rng(1234 + runs)
    case = next(c for c in base.cases if c.case_id == CHUNKED)
    flagged = 0
    for _ in range(100):
        a, b = base.model_copy(deep=True), base.model_copy(deep=True)
        for rec in (a, b):
            c = next(c for c in rec.cases if c.case_id == CHUNKED)
            make.set_times(c, (case.metrics.total_s.median *
                               (1 + 0.1 * rng.standard_normal(runs))).tolist())
        flagged += compare(a, b).regression
    assert flagged <= 5


def test_newly_failed_case_is_a_regression(new):
    broken = new.model_copy(deep=True)
    case = next(c for c in broken.cases if c.case_id == CHUNKED)
    case.status = "failed"
    case.error = ErrorInfo(type="ValueError", message="do not evenly divide\nmore", traceback="")
    result = compare(new, broken)
    bad = [c for c in result.cases if c.regression]
    assert [c.case_id for c in bad] == [CHUNKED] and bad[0].verdict == "failed"
    assert "ValueError: do not evenly divide" in bad[0].reason


def timed_out(rec: RunRecord, own: float | None, others: float | None,
              message: str = "case exceeded runs.timeout_s=120") -> RunRecord:
    """A copy whose chunked case failed with `message`, its own load `own`, the other
    cases' `others` (None: not recorded)."""
    out = rec.model_copy(deep=True)
    for c in out.cases:
        share = own if c.case_id == CHUNKED else others
        c.load = None if share is None else CaseLoad(window_s=2.0, cpus=2, other_share=share,
                                                     other_cpu_s=4 * share, source="/proc")
        if c.case_id == CHUNKED:
            c.status = "failed"
            c.error = ErrorInfo(type="CaseTimeout", message=message, traceback="")
    return out


@pytest.mark.parametrize("own, others, message, verdict", [
    (0.9, None, "case exceeded runs.timeout_s=120", "inconclusive"),  # its own load
    (None, 0.9, "case exceeded runs.timeout_s=120 (the worker did not return to Python: "
     "a hang in native code)", "inconclusive"),  # a killed worker: its run's other cases
    (0.02, 0.9, "case exceeded runs.timeout_s=120", "failed"),  # quiet itself: a failure
    (None, 0.02, "case exceeded runs.timeout_s=120", "failed"),  # a quiet machine
    (0.9, 0.9, "do not evenly divide", "failed"),  # busy, but no timeout: a failure
])
def test_a_case_cut_short_on_a_busy_machine_is_inconclusive(new, own, others, message, verdict):
    """The A/A matrix's lesson: beside busy loops a case ran past runs.timeout_s (each run
    8x its quiet time) and compare exited 1 on `failed`; a deadline is a timing verdict,
    and on a busy side no evidence of the code."""
    result = compare(new, timed_out(new, own, others, message))
    (case,) = [c for c in result.cases if c.case_id == CHUNKED]
    assert case.verdict == verdict and case.regression == (verdict == "failed"), case.reason
    assert result.regression == (verdict == "failed")
    if verdict == "inconclusive":
        assert "on a busy machine: new side: other processes held" in case.reason
        assert "cut short by their deadline on a busy machine" in verdict_line(result)


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


def test_warnings_for_packages_config_and_cases(new):
    other = new.model_copy(deep=True)
    other.provenance.packages["jax"] = "0.9.0"
    other.config_sha256 = "0" * 64
    other.config["runs"] = {"warmup": 0, "timed": 5}
    other.cases = other.cases[1:]
    warnings = "\n".join(compare(new, other).warnings)
    for text in ("jax 0.8.1 -> 0.9.0", "config differs in: runs",
                 "jax/single/tp=1 is in the baseline but not in the new"):
        assert text in warnings


def test_json_format_has_outcome_and_method():
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), "--format", "json",
              "--allow-untested")
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data["schema"] == "mibench.compare/3" and data["outcome"] == "pass"
    assert "+ = slower" in data["convention"]
    assert data["regression"] is False and data["exit_code"] == 0
    assert data["methods"] == [METHOD] and len(data["cases"]) == 16
    assert data["floor"] == {"value": 0.03, "source": "default for tpu devices"}


def test_markdown_output_names_method_and_numbers():
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), "--threshold", "10%",
              "--allow-untested")
    assert out.exit_code == 0
    assert METHOD in out.stdout and "by more than 10%" in out.stdout
    assert "time per item, new / base - 1, + = slower" in out.stdout
    assert "noise floor, 3% (default for tpu devices)" in out.stdout
    assert "<details><summary>15 passing parity check(s)</summary>" in out.stdout


def test_thresholds():
    assert parse_threshold("5%") == parse_threshold("0.05") == parse_threshold("5") == 0.05


# --- the between-run test itself ----------------------------------------------------------


def test_between_runs_one_process_each_is_the_floor_interval():
    test = between_runs([[1.0, 1.0, 1.0]], [[2.0, 2.0, 2.0]], floor=0.10, alpha=0.01)
    half = 2.5758 * math.sqrt(2) * math.log(1.1)  # normal quantile, floor on both sides
    assert test.ratio == pytest.approx(2.0) and test.quantile == "normal"
    assert test.low == pytest.approx(2 * math.exp(-half), rel=1e-3)
    assert test.high == pytest.approx(2 * math.exp(half), rel=1e-3) and test.significant
    assert not between_runs([[1.0] * 3], [[1.15] * 3], floor=0.10).significant


def test_between_runs_uses_the_spread_of_processes_when_it_exceeds_the_floor():
    base = [[1.0] * 3, [1.3] * 3, [0.8] * 3]  # processes far apart: s2 > floor
    new = [[1.1] * 3, [1.4] * 3, [0.9] * 3]
    test = between_runs(base, new, floor=0.03)
    assert test.k_base == test.k_new == 3 and test.quantile == "t(4)"
    assert not test.significant and test.low < 1 < test.high


# --- like with like ---------------------------------------------------------------------


def with_items(rec: RunRecord, n: int) -> RunRecord:
    """The same artifact as if every case had scored `n` items (summaries recomputed)."""
    out = rec.model_copy(deep=True)
    for c in out.cases:
        c.workload = c.workload.replace(num_items=n)  # a frozen spec
        if c.timed_s:
            make.set_times(c, c.timed_s)
    return out


@pytest.mark.parametrize("order", ["big-small", "small-big"])
def test_other_workload_is_not_comparable_either_way(real, tmp_path, order):
    big = save(with_items(real, 500), tmp_path / "big.json")
    small = save(with_items(drifted(real, 0.05), 32), tmp_path / "small.json")
    a, b = (big, small) if order == "big-small" else (small, big)
    out = cli(a, b)
    assert out.exit_code == 2, out.output
    line = error_line(out)
    assert "nothing compared" in line and "--rebaseline" in line and b in line
    assert "workload.num_items" in line
    assert "**NOT COMPARED**" in out.stdout and "| not comparable |" in out.stdout


def test_other_hardware_is_not_comparable_and_shown_side_by_side(real):
    other = real.model_copy(deep=True)
    other.provenance.host["cpus"] = 8
    result = compare(real, other)
    assert result.outcome == "not compared" and result.exit_code == 2
    assert all(c.verdict == "not comparable" for c in result.cases)
    case = result.cases[0]
    assert case.base_items_per_s and case.new_items_per_s and "cpus 2 vs 8" in case.reason
    tp = real.model_copy(deep=True)
    tp.cases[0].topology = TopologyRecord(tp=1, mesh_shape={"tp": 2})
    assert "mesh" in compare(real, tp).cases[0].reason


def test_rebaseline_accepts_what_is_not_comparable(real, tmp_path):
    small = save(with_items(real, 32), tmp_path / "small.json")
    out = cli(str(REAL), small, "--rebaseline")
    assert out.exit_code == 0, out.output
    assert out.stdout.strip().splitlines()[-1].startswith(f"rebaselined: {small} replaces")
    skipped = real.model_copy(deep=True)
    for c in skipped.cases:
        c.status = "skipped"
    out = cli(str(REAL), save(skipped, tmp_path / "skipped.json"), "--rebaseline")
    assert out.exit_code == 2 and "none of its cases ran ok" in error_line(out)


def test_everything_skipped_is_not_compared_and_exits_2(real, tmp_path):
    skipped = real.model_copy(deep=True)
    for c in skipped.cases:
        c.status = "skipped"
        c.error = ErrorInfo(type="TopologyUnavailable", message="no devices", traceback="")
    path = save(skipped, tmp_path / "skipped.json")
    for a, b in ((path, path), (str(REAL), path)):
        out = cli(a, b)
        assert out.exit_code == 2, out.output
        assert "no comparable case ran ok on both sides" in error_line(out)
        assert "No regression" not in out.output


def test_no_case_in_common_exits_2(real, tmp_path):
    renamed = real.model_copy(deep=True)
    for c in renamed.cases:
        c.case_id += "/renamed"
    out = cli(str(REAL), save(renamed, tmp_path / "renamed.json"))
    assert out.exit_code == 2 and "no case id in common" in error_line(out)


# --- drift, identical runs, scores, untested cases ----------------------------------------


def test_identical_artifacts_pass(real):
    """Nothing failed the gate (exit 0), but the intervals of 3 runs reach beyond 5%: the
    headline says undecided, never "No regression" (a case it cannot vouch for)."""
    out = cli(str(REAL), str(REAL))
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines()[2].startswith("Undecided against ")
    assert "No regression" not in out.stdout
    assert "7 case(s) compared" in out.stdout


def steady(rec: RunRecord) -> RunRecord:
    """Fake data: every ok case's runs at its median, +-1%."""
    out = rec.model_copy(deep=True)
    for c in out.cases:
        if c.status == "ok":
            m = c.metrics.total_s.median
            make.set_times(c, [m, m * 1.01, m * 0.99])
    return out


def test_fifteen_percent_drift_is_inconclusive_and_a_2x_slowdown_a_regression(real, tmp_path):
    """Two runs of one config differing only by a drift of every case: within the CPU's
    default noise floor (10%) at 15%, a regression at 2x."""
    base = steady(real)
    drift = compare(base, drifted(base, 1.15))
    assert drift.exit_code == 0 and drift.floor.value == 0.10 and len(drift.compared) == 7
    assert {c.verdict for c in drift.compared} == {"inconclusive"}
    assert all(c.items_per_s_low < 0 < c.items_per_s_high for c in drift.compared)
    assert "7 inconclusive" in verdict_line(drift) and "`mibench ab`" in verdict_line(drift)
    slow = compare(base, drifted(base, 2.0))
    assert slow.exit_code == 1 and {c.verdict for c in slow.compared} == {"regression"}
    assert all(c.items_per_s_high < -0.05 for c in slow.compared)
    # the real artifact's runs spread up to 3x on 2 shared cores: its noisiest cases stay
    # inconclusive even at 2x, the steadier ones fail the gate
    out = cli(str(REAL), save(drifted(real, 2.0), tmp_path / "slow.json"))
    assert out.exit_code == 1, out.output
    assert out.stdout.splitlines()[2].startswith("**REGRESSION** against ")
    data = json.loads(cli(str(REAL), str(tmp_path / "slow.json"), "--format", "json").stdout)
    verdicts = {c["case_id"]: c["verdict"] for c in data["cases"]}
    assert verdicts["jax/single/tp=1"] == verdicts[REAL_CASE] == "regression"
    assert verdicts["torch/single/tp=1"] == "inconclusive"  # runs of 10.5, 3.7 and 2.7 s


def test_a_narrower_noise_floor_makes_the_drift_a_regression(real, tmp_path):
    path = save(drifted(real, 1.15), tmp_path / "drift.json")
    assert cli(str(REAL), path).exit_code == 0
    out = cli(str(REAL), path, "--noise-floor", "1%")
    assert out.exit_code == 1 and "noise floor 1% (--noise-floor)" in out.stdout


def test_noise_floor_learnt_from_aa_runs(real, tmp_path):
    folder = tmp_path / "aa"
    for i, factor in enumerate((1.0, 1.04, 0.97, 1.02)):
        rec = drifted(real, factor)
        rec.run_id = f"aa-{i}"
        save(rec, folder / f"run{i}.json")
    floor = aa_noise([read_artifact(p) for p in sorted(folder.glob("*.json"))], "aa")
    assert 0.02 < floor.value < 0.10 and "21 degrees of freedom" in floor.source
    out = cli(str(REAL), str(folder / "run1.json"), "--noise-from", str(folder))
    assert out.exit_code == 0 and "learnt from A/A runs in" in out.stdout
    # the pair being judged is left out (run1 here; REAL is not in the folder), and said
    assert "14 degrees of freedom" in out.stdout
    assert "left out: the 1 artifact(s) judged" in out.stdout
    lone = tmp_path / "lone"
    save(real, lone / "only.json")
    out = cli(str(REAL), str(REAL), "--noise-from", str(lone))
    assert out.exit_code == 2 and "--noise-from" in error_line(out)


def test_noise_from_leaves_out_busy_runs_and_skips_other_kinds(real, tmp_path):
    folder = tmp_path / "aa"
    for i, factor in enumerate((1.0, 1.04, 0.97, 1.5)):
        rec = drifted(real, factor)
        rec.run_id = f"aa-{i}"
        for c in rec.cases:  # the 1.5x run was measured beside other work
            c.load = CaseLoad(window_s=2.0, cpus=2, other_share=0.6 if i == 3 else 0.02,
                              other_cpu_s=2.4 if i == 3 else 0.08, own_cpu_s=1.0,
                              source="/proc")
        save(rec, folder / f"run{i}.json")
    (folder / "ab.json").write_text(json.dumps({"schema": "mibench.ab/3"}))
    floor = aa_noise([read_artifact(p) for p in sorted(folder.glob("run*.json"))], "aa")
    assert "left out: 7 case run(s) on a busy machine" in floor.source
    assert floor.value < 0.10  # the busy run's 1.5x never widened it
    out = cli(str(REAL), str(folder / "run1.json"), "--noise-from", str(folder))
    assert out.exit_code == 0, out.output
    assert "skipped " in out.stderr and "ab.json: a mibench.ab/3 file" in out.stderr


def with_scores(rec: RunRecord, scale: float = 1.0) -> RunRecord:
    out = rec.model_copy(deep=True)
    for c in out.cases:
        c.scores = [[[0.5 * scale, 0.25], [0.125, 1e-30]]]
    return out


def test_moved_scores_fail_the_gate_naming_case_and_difference(real, tmp_path):
    base = save(with_scores(real), tmp_path / "base.json")
    assert cli(base, save(with_scores(real), tmp_path / "same.json")).exit_code == 0
    moved = with_scores(real)
    moved.cases[2].scores = [[[0.5, 0.25], [0.125 * 1.001, 1e-30]]]  # ln diff 1e-3 > 1e-5
    out = cli(base, save(moved, tmp_path / "moved.json"))
    assert out.exit_code == 1, out.output
    verdict = out.stdout.splitlines()[2]
    assert real.cases[2].case_id in verdict and "max |ln score diff| 0.001 > 1e-05" in verdict
    assert "(request 0, item 1, label 0)" in out.stdout
    out = cli(str(REAL), base)  # the baseline is older: no scores
    assert out.exit_code == 0
    assert "Scores not compared (7 case(s)): none recorded in the baseline" in out.stdout


def test_untested_case_fails_the_gate_unless_allowed(real, tmp_path):
    once = real.model_copy(deep=True)
    make.set_times(once.cases[0], once.cases[0].timed_s[:1])
    path = save(once, tmp_path / "once.json")
    out = cli(str(REAL), path)
    assert out.exit_code == 1, out.output
    assert out.stdout.splitlines()[2].startswith("**UNTESTED** against ")
    assert "REGRESSION" not in out.stdout and real.cases[0].case_id in out.stdout
    out = cli(str(REAL), path, "--allow-untested")
    assert out.exit_code == 0 and "1 untested (allowed by --allow-untested)" in out.stdout


def test_several_processes_are_the_samples(real):
    def processes(rec: RunRecord, factors: list[float]) -> RunRecord:
        out = rec.model_copy(deep=True)
        for c in out.cases:
            runs = [[t * f for t in c.timed_s] for f in factors]
            make.set_times(c, [t for r in runs for t in r])
            c.process_timed_s = [c.timed_s[i * 3:(i + 1) * 3] for i in range(len(factors))]
        return out

    base = processes(real, [1.0, 1.02, 0.99])
    result = compare(base, processes(real, [1.5, 1.52, 1.49]))
    assert result.outcome == "regression"
    assert {(c.test.k_base, c.test.n_base) for c in result.compared} == {(3, 9)}


# --- invalid artifacts and bad input --------------------------------------------------------


def _edit(tmp_path: Path, name: str, edit) -> Path:
    data = json.loads(REAL.read_text())
    edit(data)
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return path


INVALID = {
    "nan": (lambda d: d["cases"][1]["timed_s"].__setitem__(0, float("nan")), "cases.1.timed_s"),
    "inf": (lambda d: d["cases"][1]["timed_s"].__setitem__(0, float("inf")), "cases.1.timed_s"),
    "negative": (lambda d: d["cases"][1]["timed_s"].__setitem__(0, -0.5), "cases.1.timed_s"),
    "zero": (lambda d: d["cases"][1]["timed_s"].__setitem__(0, 0.0),
             "case jax/packed/mask=dense/tp=1: timed_s[0] = 0.0 is not a run time"),
    "duplicate": (lambda d: d["cases"].append(d["cases"][0]),
                  "case jax/single/tp=1 appears twice"),
    "summary": (lambda d: d["cases"][2]["metrics"]["total_s"].__setitem__("median", 9.0),
                "case jax/packed/mask=segment/tp=1: metrics.total_s.median is 9"),
    "no-cases": (lambda d: d.__setitem__("cases", []), "has no cases"),
}


@pytest.mark.parametrize("kind", list(INVALID))
def test_invalid_artifact_is_one_line_naming_file_and_case(tmp_path, kind):
    edit, needle = INVALID[kind]
    bad = _edit(tmp_path, kind, edit)
    for args in ((str(REAL), str(bad)), (str(bad), str(REAL))):
        out = cli(*args)
        assert out.exit_code == 2, out.output
        line = error_line(out)
        assert str(bad) in line and needle in line, line


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
    assert str(bad) in error_line(out) and out.stdout == ""


@pytest.mark.parametrize("option", [["--threshold", "x"], ["--threshold", "150%"],
                                    ["--format", "xml"], ["--noise-floor", "x"],
                                    ["--noise-floor", "5%", "--noise-from", "."]])
def test_bad_options_exit_2(option):
    out = cli(str(DATA / "base.json"), str(DATA / "new.json"), *option)
    assert out.exit_code == 2 and out.output.startswith("error: ")
    assert option[0] in error_line(out)


def test_real_artifact_with_a_newly_failed_case_exits_1(tmp_path, real):
    failed = real.model_copy(deep=True)
    case = next(c for c in failed.cases if c.case_id == REAL_CASE)
    case.status = "failed"
    case.error = ErrorInfo(type="XlaRuntimeError", message="RESOURCE_EXHAUSTED: out of memory",
                           traceback="...")
    out = cli(str(REAL), save(failed, tmp_path / "failed.json"))
    assert out.exit_code == 1 and "newly failed: XlaRuntimeError" in out.stdout


# --- honest verdict words and the one convention -------------------------------------------


@pytest.mark.parametrize("ratio, low, high, significant, verdict", [
    (1.30, 1.10, 1.50, True, "regression"),
    (0.70, 0.55, 0.90, True, "improvement"),
    (1.01, 0.97, 1.04, False, "unchanged"),  # the whole interval within 5%
    (1.01, 0.70, 1.40, False, "inconclusive"),  # estimate within 5%, interval far beyond
    (1.03, 1.01, 1.06, True, "inconclusive"),  # real, small, but may be beyond 5%
    (1.20, 0.90, 1.60, False, "inconclusive"),  # beyond 5%, within the noise
])
def test_timing_verdict_words(ratio, low, high, significant, verdict):
    from mibench.harness.judge.compare import DECIDE, timing_verdict

    word, why = timing_verdict(ratio, low, high, significant, 0.05, "99%")
    assert word == verdict
    if word == "inconclusive":
        assert DECIDE in why and "`mibench ab`" in why and "--noise-from" in why


def _old_interval(base, new, floor, alpha):
    """The formula `between_runs` used before scipy's interval: d +- q se."""
    from scipy.stats import norm
    from scipy.stats import t as student

    sf2, parts, measured = math.log1p(floor) ** 2, [], False
    for units in (base, new):
        logs = [[math.log(t) for t in u] for u in units]
        df = sum(len(u) - 1 for u in logs)
        ss = sum(sum((x - np.mean(u)) ** 2 for x in u) for u in logs if len(u) > 1)
        meds = [math.log(float(np.median(u))) for u in units]
        v = sf2 + math.pi / 2 * (ss / df if df else 0.0) * np.mean([1 / len(u) for u in units])
        s2 = float(np.var(meds, ddof=1)) if len(meds) > 1 else 0.0
        measured |= s2 > v
        parts.append((meds, max(s2, v)))
    (mb, vb), (mn, vn) = parts
    d, se = np.mean(mn) - np.mean(mb), math.sqrt(vb / len(mb) + vn / len(mn))
    df = len(mb) + len(mn) - 2
    q = student.ppf(1 - alpha / 2, df) if measured and df > 0 else norm.ppf(1 - alpha / 2)
    return math.exp(d - q * se), math.exp(d + q * se)


@pytest.mark.parametrize("processes, quantile", [(1, "normal"), (3, "t(4)")])
def test_between_runs_interval_is_scipys_and_unchanged(processes, quantile):
    """The interval comes from scipy's t / normal `interval`: the same figures as the
    formula it replaced (one process a side: the floor, normal; three: t)."""
    base = [[1.0, 1.1, 0.9], [2.0, 2.1, 1.9], [1.5, 1.4, 1.6]][:processes]
    new = [[1.3, 1.2, 1.25], [2.1, 2.4, 2.2], [1.5, 1.9, 1.7]][:processes]
    floor = 0.10
    test = between_runs(base, new, floor, 0.01)
    low, high = _old_interval(base, new, floor, 0.01)
    assert test.quantile == quantile
    assert (test.low, test.high) == (pytest.approx(low, rel=1e-12), pytest.approx(high, rel=1e-12))
    assert test.new_s / test.base_s == pytest.approx(test.ratio)


def test_paired_interval_is_scipys_and_unchanged():
    from scipy.stats import t as student

    from mibench.harness.judge.paired import paired_test

    d = [0.1, 0.25, 0.05, 0.3, 0.12]
    v = paired_test(d)
    mean, se = np.mean(d), np.std(d, ddof=1) / math.sqrt(len(d))
    half = student.ppf(0.995, len(d) - 1) * se
    assert v.low == pytest.approx(math.expm1(mean - half), rel=1e-12)
    assert v.high == pytest.approx(math.expm1(mean + half), rel=1e-12)

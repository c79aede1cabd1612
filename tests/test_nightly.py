"""The nightly loop's decisions (docs/nightly.md) on made-up artifacts and histories, through
a fake `steps` (tests/nightly_fakes.py): seeding, pass and promotion, a suspicion confirmed
by `ab` and bisected, a known regression reported without a second bisect, a further
change from the confirmed-bad level, a busy run disproved and not chased again, what the
budget leaves open, failures without timing, insufficient data, accept and fix."""

from __future__ import annotations

import json

import pytest
from nightly_fakes import BUSY, EXTEND, PACKED, FakeSteps, nights, sha
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.cli import app
from mibench.harness.nightly.index import Folder, accept
from mibench.harness.nightly.summary import MAX_LINES, render
from mibench.harness.records.nightly import NightSummary, SummaryCase, read_index, read_summary


@pytest.fixture
def world(tmp_path):
    """A fake repository (commit 4 makes prefill_extend 2x slower) and a history folder."""
    return nights(tmp_path)


def index(history):
    return read_index(history / "index.json")


def calls(steps, kind):
    return [c for c in steps.calls if c[0] == kind]


def test_the_first_night_seeds_the_history_and_says_how_many_runs(world):
    steps, history, night = world
    result = night(0)
    assert result.exit_code == 0
    assert len(calls(steps, "run")) == 5  # SEED_RUNS
    idx = index(history)
    assert idx.baseline.commit == sha(0) and idx.baseline.reason.startswith("seed")
    assert {c.verdict for c in result.summary.cases} == {"pass"}
    assert "seeded: 5 of 5 runs" in result.summary.cases[0].reason
    assert len(result.markdown.splitlines()) <= MAX_LINES
    twin = read_summary(result.folder / "summary.json")
    assert twin.verdict == result.summary.verdict and (result.folder / "summary.md").exists()


def test_seeds_on_a_busy_machine_are_insufficient_data_and_still_a_baseline(world):
    steps, history, night = world
    steps.load = BUSY
    result = night(0)
    assert result.exit_code == 0 and result.summary.verdict == "insufficient data"
    assert "0 of 5 runs" in result.summary.cases[0].reason
    assert index(history).baseline is not None


def test_a_seed_with_a_failed_case_sets_no_baseline_and_fails(world):
    steps, history, night = world
    steps.fail = {PACKED}
    result = night(0)
    assert result.exit_code == 1 and index(history).baseline is None
    steps.fail = set()
    assert night(1).exit_code == 0 and len(calls(steps, "run")) == 5  # seeded again


def test_an_unchanged_night_passes_without_ab_and_becomes_the_baseline(world):
    steps, history, night = world
    night(0)
    result = night(2)
    assert result.exit_code == 0 and result.summary.verdict == "pass"
    assert not calls(steps, "ab") and not calls(steps, "bisect")
    assert index(history).baseline.commit == sha(2) and result.summary.promoted


def test_a_slowdown_is_suspected_confirmed_by_ab_and_bisected_to_its_commit(world):
    steps, history, night = world
    night(0)
    night(2)
    result = night(5)
    assert result.exit_code == 1 and result.summary.verdict == "confirmed regression"
    # only the suspected case is measured by ab, between the last pass and HEAD
    assert calls(steps, "ab") == [("ab", 2, 5, (EXTEND,), 5)]
    assert calls(steps, "bisect") == [("bisect", 2, 5, (EXTEND,))]
    idx = index(history)
    (known,) = idx.known
    assert known.culprit == sha(4) and known.good == sha(2) and known.bad == sha(5)
    assert known.change == pytest.approx(1.0, abs=0.05)  # ab's +100%
    assert idx.baseline.commit == sha(2)  # not promoted
    words = {c.case_id: c.verdict for c in result.summary.cases}
    assert words == {EXTEND: "confirmed regression", PACKED: "pass"}
    text = result.markdown
    assert len(text.splitlines()) <= MAX_LINES
    assert f"**Culprit**: `{sha(4)[:12]}` 'commit 4'" in text
    assert "Reproduce: `mibench ab" in text and "[report.md]" in text


def test_a_known_regression_fails_later_nights_without_a_second_bisect(world):
    steps, history, night = world
    for at in (0, 2, 5):
        night(at)
    result = night(8)
    assert result.exit_code == 1 and result.summary.verdict == "known regression"
    assert not calls(steps, "ab") and not calls(steps, "bisect")
    (culprit,) = result.summary.culprits
    assert culprit.known and culprit.commit == sha(4) and culprit.cases == [EXTEND]
    assert "**Known regression**, still present" in result.markdown
    assert len(index(history).known) == 1


def test_a_further_slowdown_from_the_known_level_is_a_new_suspicion(world):
    steps, history, night = world
    steps.effects[7] = {EXTEND: 2.0}
    for at in (0, 2, 5):
        night(at)
    result = night(8)
    assert calls(steps, "ab") == [("ab", 5, 8, (EXTEND,), 5)]  # from the confirmed-bad night
    assert result.exit_code == 1
    known = index(history).known
    assert [k.culprit for k in known] == [sha(4), sha(7)] and known[1].good == sha(5)


def test_a_fixed_known_regression_is_closed_by_ab(world):
    steps, history, night = world
    steps.effects[7] = {EXTEND: 0.5}  # the fix
    for at in (0, 2, 5):
        night(at)
    result = night(8)
    assert calls(steps, "ab") == [("ab", 5, 8, (EXTEND,), 5)]
    assert result.exit_code == 0
    (known,) = index(history).known
    assert known.status == "fixed" and known.fixed_at == sha(8)


def test_a_busy_run_goes_to_ab_and_its_disproval_is_marked_and_not_chased_again(world):
    steps, history, night = world
    night(0)
    night(2)
    steps.load, steps.scale = BUSY, {PACKED: 1.6}  # busy, and slower for it
    result = night(3)
    # the suspicion (slower) first, then the case the busy machine left undecided
    assert calls(steps, "ab") == [("ab", 2, 3, (PACKED,), 5), ("ab", 2, 3, (EXTEND,), 5)]
    words = {c.case_id: c.verdict for c in result.summary.cases}
    assert words == {PACKED: "disproved", EXTEND: "pass"} and result.exit_code == 0
    (mark,) = index(history).disproved
    assert mark.case_id == PACKED and mark.bad == sha(3) and mark.verdict == "unchanged"
    assert index(history).baseline.commit == sha(3) and result.summary.promoted


def test_a_disproved_suspicion_at_the_same_commit_is_not_chased(world):
    steps, history, night = world
    night(0)
    night(2)
    steps.load, steps.scale = BUSY, {PACKED: 1.6}
    steps.ab_says = {EXTEND: [1.0, 1.3, 0.8, 1.4, 0.7]}  # left open: not promoted
    first = night(3)
    assert first.exit_code == 0 and not first.summary.promoted
    steps.ab_says = {}
    second = night(3)
    assert ("ab", 2, 3, (EXTEND,), 5) in calls(steps, "ab")  # only the one left open
    packed = next(c for c in second.summary.cases if c.case_id == PACKED)
    assert packed.verdict == "disproved" and "not chased again" in packed.reason


def test_an_undecided_ab_is_measured_again_then_left_open_and_not_marked(world):
    steps, history, night = world
    night(0)
    night(2)
    steps.scale = {EXTEND: 2.0}  # the run says 2x, ab cannot tell
    steps.ab_says = {EXTEND: [1.0, 1.5, 0.7, 1.6, 0.6] * 4}
    result = night(3, rounds=5, max_rounds=10)
    assert [c[4] for c in calls(steps, "ab")] == [5, 5]  # 5 more rounds: 10 judged
    (case,) = [c for c in result.summary.cases if c.case_id == EXTEND]
    assert case.verdict == "suspected regression" and "left open, not marked" in case.reason
    (left,) = result.summary.undecided
    assert "`ab` left it inconclusive at 10 rounds" in left
    # the rounds that would decide it at 5%, from the spread of its rounds (a log-sd of
    # about 0.4 a round: more than the 1000 a command may ask, so the cap)
    assert "--rounds 1000" in left
    assert result.exit_code == 0 and not result.summary.promoted
    assert not index(history).disproved and not index(history).known


def test_a_spent_budget_leaves_the_suspicion_open_with_the_command_that_decides_it(world):
    steps, history, night = world
    night(0)
    night(2)
    steps.scale = {EXTEND: 2.0}
    result = night(3, budget_s=0)
    assert not calls(steps, "ab") and result.exit_code == 0
    (left,) = result.summary.undecided
    assert "time budget" in left and "mibench ab" in left
    assert "Left open:" in result.markdown and not index(history).disproved


def test_more_commits_than_max_commits_are_not_bisected(world):
    steps, history, night = world
    night(0)
    result = night(5, max_commits=2)
    assert not calls(steps, "bisect") and result.exit_code == 1
    (known,) = index(history).known
    assert known.culprit is None and "more than --max-commits 2" in known.bisect
    assert "mibench bisect" in known.bisect
    first, last = sha(0)[:12], sha(5)[:12]  # the range it lies in, never GOOD as culprit
    assert f"**Culprit**: not named, between `{first}..{last}`" in result.markdown


@pytest.mark.parametrize("what", ["failed", "scores", "parity"])
def test_what_compare_fails_without_timing_fails_the_night_without_ab(world, what):
    steps, history, night = world
    night(0)
    steps.head_i = 1
    if what == "failed":
        steps.fail = {PACKED}
    result = _with_edit(steps, history, night, what)
    assert result.exit_code == 1 and not calls(steps, "ab")
    assert result.summary.verdict == {"failed": "failed", "scores": "scores moved",
                                      "parity": "regression"}[what]


def _with_edit(steps, history, night, what):
    original = steps.record

    def edited(k):
        record = original(k)
        if what == "scores":
            record.cases[0].scores = [[[0.9]]]
        if what == "parity":
            from mibench.harness.records import ParityCheck, ParityRecord

            record.parity = ParityRecord(reference={}, workload={}, checks=[ParityCheck(
                check="isolation", case_id=PACKED, against=PACKED, max_abs_diff=1.0,
                mean_abs_diff=1.0, tolerance=1e-6, status="failed")], passed=False)
        return record

    steps.record = edited
    return night(1)


def test_too_few_quiet_runs_of_one_commit_go_to_ab_which_decides_them(world):
    """Insufficient data is never good news: `ab` decides the cases (here: unchanged, so
    they pass and the night promotes); when `ab` cannot run, they stay insufficient data
    and the baseline stays."""
    steps, history, night = world
    loads = iter([BUSY, BUSY, BUSY, 0.0, 0.01])  # two quiet seeds: one is the baseline
    original = steps.record

    def seeded(k):
        steps.load = next(loads, 0.0)
        return original(k)

    steps.record = seeded
    night(0)
    result = night(2, budget_s=0)
    assert {c.verdict for c in result.summary.cases} == {"insufficient data"}
    assert "holds 1 quiet run(s) of one commit" in result.summary.cases[0].reason
    assert result.exit_code == 0 and not result.summary.promoted
    assert len(result.summary.undecided) == 2 and not calls(steps, "ab")
    result = night(2)
    assert calls(steps, "ab") == [("ab", 0, 2, (PACKED, EXTEND), 5)]
    assert {c.verdict for c in result.summary.cases} == {"pass"}
    assert result.summary.promoted and index(history).baseline.commit == sha(2)


def test_accept_records_who_and_why_and_rebaselines(world, tmp_path):
    steps, history, night = world
    for at in (0, 2, 5):
        night(at)
    with pytest.raises(MibenchError, match="--why"):
        accept(Folder(history), ["*"], "ana", " ")
    with pytest.raises(MibenchError, match="matches no open known regression"):
        accept(Folder(history), ["jax/packed*"], "ana", "intended")
    out = CliRunner().invoke(app, ["accept", str(history), "--case", "jax/prefill_extend*",
                                   "--by", "ana", "--why", "exact softmax, slower on purpose"])
    assert out.exit_code == 0, out.output
    assert "accepted jax/prefill_extend" in out.stdout
    idx = index(history)
    (known,) = idx.known
    assert known.status == "accepted" and known.accepted.by == "ana"
    assert idx.baseline.commit == sha(5) and idx.baseline.reason.startswith("accepted by ana")
    assert night(8).exit_code == 0  # judged from the accepted level


def test_a_missing_baseline_run_is_bad_input_naming_it(world):
    steps, history, night = world
    night(0)
    (history / index(history).baseline.artifact).unlink()
    with pytest.raises(MibenchError, match="--reseed"):
        night(2)


def test_a_history_of_another_config_is_refused(world):
    steps, history, night = world
    night(0)
    data = json.loads((history / "index.json").read_text())
    data["config"] = "other"
    (history / "index.json").write_text(json.dumps(data))
    with pytest.raises(MibenchError, match="a history folder of its own"):
        night(1)


def test_the_summary_fits_40_lines_with_many_cases():
    summary = NightSummary(config="big", commit="a" * 40, verdict="pass", exit_code=0,
                           baseline="b" * 40, reproduce=["mibench ab x y c.yaml"],
                           undecided=["one", "two", "three", "four"], noise="3%",
                           links={"report": "r.md", "history": "h.md"},
                           cases=[SummaryCase(case_id=f"jax/case{i}", verdict="pass",
                                              reason="x" * 500) for i in range(60)])
    summary.cases[30].verdict = "confirmed regression"
    text = render(summary)
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    assert "jax/case30" in lines[6]  # the one to look at first
    assert any("more (pass): summary.json lists them" in line for line in lines)


def test_the_cli_refuses_bad_input_with_exit_2(tmp_path):
    config, few = FakeSteps(tmp_path).config_path, tmp_path / "few.yaml"
    few.write_text(config.read_text().replace("timed: 5", "timed: 2"))
    run = CliRunner().invoke
    out = run(app, ["nightly", str(few), "--history", str(tmp_path / "h")])
    assert out.exit_code == 2 and "runs.timed" in out.output
    out = run(app, ["nightly", str(config), "--history", str(tmp_path / "h"), "--rounds", "2"])
    assert out.exit_code == 2 and "--rounds" in out.output
    out = run(app, ["nightly", str(config), "--history", str(tmp_path / "h"), "--budget",
                    "soon"])
    assert out.exit_code == 2 and "--budget" in out.output

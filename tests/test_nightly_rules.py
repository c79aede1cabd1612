"""The nightly's rules on a noisy machine (issue 40), on made-up histories through the fake
`steps` (tests/nightly_fakes.py): undecided is never good news (a case `compare` does not
show within the threshold goes to `ab`; only a night whose cases all pass promotes), noise
that no load measurement sees (each run's times spread by a random factor, the load faked
quiet) cannot turn a 16x slowdown into a pass, a run of undecided nights fails the job, an
improvement promotes only with the new run's parity behind it, the budget goes to
suspicions first, a force-push never promotes."""

from __future__ import annotations

import pytest
from nightly_fakes import EXTEND, PACKED, nights, sha

from mibench.harness.judge.settle import BLIND_EXIT
from mibench.harness.records.nightly import read_index


@pytest.fixture
def world(tmp_path):
    return nights(tmp_path, n=12, effects={4: {EXTEND: 16.0}}, threshold=0.10)


def index(history):
    return read_index(history / "index.json")


def abs_of(steps):
    return [c for c in steps.calls if c[0] == "ab"]


def words(result) -> dict[str, str]:
    return {c.case_id: c.verdict for c in result.summary.cases}


def test_a_16x_slowdown_in_a_noisy_history_the_load_cannot_see_never_promotes(world):
    """Seeds spread by e^(+-1) with the load faked quiet: the floor learnt is wide, `compare`
    calls 16x inconclusive, and `ab` (interleaved: the noise falls on both sides) confirms
    it. Before, inconclusive mapped to pass and the slow commit became the baseline."""
    steps, history, night = world
    steps.spread = 1.0
    night(0)
    result = night(5)
    extend = next(c for c in result.summary.cases if c.case_id == EXTEND)
    assert extend.verdict == "confirmed regression" and result.exit_code == 1
    assert extend.run_change is not None  # compare's unpaired figure kept beside ab's
    assert index(history).baseline.commit == sha(0) and not result.summary.promoted
    assert index(history).known[0].culprit == sha(4)
    assert any("wider than the 10% threshold" in line for line in result.summary.notes)
    report = (result.folder / "report.md").read_text()
    assert "## The night's A/B evidence" in report and "confirmed regression" in report


def test_without_ab_the_noisy_16x_stays_undecided_and_keeps_the_baseline(world):
    """The control: no budget for `ab`, so nothing decides it: inconclusive, exit 0, the
    baseline where it was, and the command that decides it is said."""
    steps, history, night = world
    steps.spread = 1.0
    night(0)
    result = night(5, budget_s=0)
    assert words(result)[EXTEND] == "inconclusive" and result.exit_code == 0
    assert not result.summary.promoted and index(history).baseline.commit == sha(0)
    assert any(EXTEND in line and "mibench ab" in line for line in result.summary.undecided)
    assert index(history).nights[-1].undecided  # recorded as an undecided night


def test_a_run_of_undecided_nights_fails_the_job_naming_cases_and_rounds(world):
    steps, history, night = world
    steps.spread = 1.0
    night(0)
    codes = [night(i, budget_s=0, max_undecided=3).exit_code for i in (1, 2, 3)]
    assert codes == [0, 0, BLIND_EXIT]
    last = night(3, budget_s=0, max_undecided=3)  # a fourth one: still blind
    assert last.exit_code == BLIND_EXIT
    (blind,) = [n for n in last.summary.notes if n.startswith("**Blind for")]
    assert "Blind for 4 nights" in blind and "rounds" in blind and "(exit 5)" in blind
    assert "Blind for 4 nights" in last.markdown
    # a decided night ends the run
    steps.spread = 0.0
    assert night(3).exit_code == 0


def test_every_undecided_case_goes_to_ab_suspicions_first(world):
    """A slower case (a suspicion) and an undecided one: with budget for one A/B only,
    the suspicion is measured and the undecided case is left open with its command."""
    steps, history, night = world
    night(0)
    steps.scale = {EXTEND: 1.6, PACKED: 1.0}
    steps.spread = 0.0
    steps.load = 0.02
    original = steps.record

    def one_wide(k):  # PACKED's new run spreads: compare cannot decide it
        record = original(k)
        if steps.head_i == 1:
            from nightly_fakes import make

            case = next(c for c in record.cases if c.case_id == PACKED)
            make.set_times(case, [t * f for t, f in zip(case.timed_s, (0.5, 1.0, 2.0, 0.6,
                                                                          1.8), strict=False)])
        return record

    steps.record = one_wide
    result = night(1, budget_s=10_000)
    assert abs_of(steps)[0][3] == (EXTEND,)  # the suspicion first
    assert ("ab", 0, 1, (PACKED,), 5) in abs_of(steps)  # then the undecided case
    assert words(result)[PACKED] == "pass"  # `ab` showed it within the threshold


def test_an_improvement_promotes_only_with_parity_behind_it(world):
    steps, history, night = world
    steps.effects[3] = {PACKED: 0.7}  # 30% faster
    night(0)
    result = night(3)
    assert words(result)[PACKED] == "improvement" and result.exit_code == 0
    assert not result.summary.promoted and index(history).baseline.commit == sha(0)
    (imp,) = [r for r in index(history).regressions if r.kind == "improvement"]
    assert imp.status == "confirmed" and imp.case_id == PACKED  # flagged for a look
    steps.parity = {PACKED: "passed", EXTEND: "passed"}
    result = night(3)
    assert words(result)[PACKED] == "improvement" and result.summary.promoted
    assert index(history).baseline.commit == sha(3)


def test_a_2x_speedup_without_parity_is_suspicious_and_never_promotes(world):
    steps, history, night = world
    steps.effects[3] = {PACKED: 0.2}  # 5x faster: a mode that scores nothing?
    night(0)
    result = night(3)
    assert words(result)[PACKED] == "suspicious improvement" and result.exit_code == 0
    assert result.summary.cases[0].case_id == PACKED  # named first
    assert not result.summary.promoted
    steps.parity = {PACKED: "failed", EXTEND: "passed"}
    assert words(night(3))[PACKED] == "suspicious improvement"


def test_a_force_push_is_said_and_never_promotes(world):
    steps, history, night = world
    night(0)
    steps.rewritten = True
    result = night(2)
    assert result.exit_code == 0 and not result.summary.promoted
    assert index(history).baseline.commit == sha(0)
    assert any("does not descend from the baseline commit" in n for n in result.summary.notes)


def test_a_busy_machine_excuses_only_what_its_load_explains(world):
    """A 16x slowdown on a run whose other load was 70% (which explains at most 4.2x) is a
    suspicion, confirmed by `ab`, not an inconclusive busy run."""
    steps, history, night = world
    night(0)
    steps.load = 0.70
    result = night(5)
    extend = next(c for c in result.summary.cases if c.case_id == EXTEND)
    assert extend.verdict == "confirmed regression"
    assert abs_of(steps)[0][3] == (EXTEND,)  # a suspicion: measured first


def test_a_degenerate_engine_fails_the_night_like_any_parity_check(world):
    """A doctored engine that gives every item the same scores (flashinfer#3434): its run's
    `degenerate` check fails, a parity check that passed (or did not exist) and does not
    pass now is `compare`'s regression, and the night fails (exit 1), keeping the baseline
    (the run itself exits 3; tests/test_score_invariants.py: the check catches it)."""
    from mibench.harness.records import ParityCheck, ParityRecord

    steps, history, night = world
    night(0)
    original = steps.record

    def degenerate(k):
        record = original(k)
        if steps.head_i == 3:
            record.parity = ParityRecord(reference={}, workload={}, passed=False, checks=[
                ParityCheck(check="degenerate", variant="scores", case_id=PACKED,
                            against="its own scores: items with distinct tokens",
                            tolerance=1e-5, spread=0.0, status="failed",
                            error="request 0: its items with distinct tokens all score the "
                                  "same (log scores within 0, at most 1e-05)")])
        return record

    steps.record = degenerate
    result = night(3)
    assert result.exit_code == 1 and not result.summary.promoted
    assert index(history).baseline.commit == sha(0)
    from mibench.harness.nightly.summary import render

    text = render(result.summary)  # the cases pass: the note names the failed check
    assert f"- parity: 1 check(s) newly not passing (the night fails): degenerate/scores: " \
           f"{PACKED} vs its own scores" in text


def test_a_known_regression_compare_cannot_judge_is_checked_for_a_fix_by_ab(world):
    """Under noise the load cannot see, `compare` cannot tell a run from the confirmed-bad
    level: `ab` against the confirming commit says whether it is fixed (after the rest of
    the budget's work), so a fix is not missed for ever, and no single noisy run closes it."""
    steps, history, night = world
    steps.spread = 1.0
    night(0)
    night(5)
    steps.effects[7] = {EXTEND: 1 / 16}  # the fix
    result = night(8)
    assert ("ab", 5, 8, (EXTEND,), 5) in abs_of(steps)
    (known,) = index(history).known
    assert known.status == "fixed" and known.fixed_at == sha(8)
    assert words(result)[EXTEND] == "pass"


def test_a_known_regression_still_present_under_noise_stays_known(world):
    steps, history, night = world
    steps.spread = 1.0
    night(0)
    night(5)
    result = night(8)
    # the suspicion first (packed looked slower), then the fix check of the known one
    assert abs_of(steps) == [("ab", 0, 8, (PACKED,), 5), ("ab", 5, 8, (EXTEND,), 5)]
    extend = next(c for c in result.summary.cases if c.case_id == EXTEND)
    assert extend.verdict == "known regression" and "still present" in extend.reason
    assert result.exit_code == 1 and index(history).known[0].status == "confirmed"

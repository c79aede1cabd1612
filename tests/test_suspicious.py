"""A speedup too large to trust alone (harness/judge/suspicious.py, docs/verdicts.md): 2x or
more faster without the new side's `modes`/`engines` parity against the reference having
run and passed is a `suspicious improvement` in `compare` (screen, Markdown, JSON), in `ab`
and in the nightly, one word and one rule; exit 0, named first. With that parity passed it
is an `improvement`; below 2x the rule does not apply."""

from __future__ import annotations

import json

from nightly_fakes import PACKED, FakeSteps

from mibench.harness.ab import vouch
from mibench.harness.judge import suspicious as rule
from mibench.harness.judge.compare import compare
from mibench.harness.records import ABCase, ParityCheck
from mibench.harness.records.ab import Timing
from mibench.harness.report import fmt
from mibench.harness.verdicts import IMPROVEMENT, SUSPICIOUS_IMPROVEMENT, WORDS


def pair(tmp_path, factor: float, parity: dict | None = None):
    steps = FakeSteps(tmp_path, n=2, effects={1: {PACKED: factor}})
    steps.head_i = 0
    base = steps.record(0)
    steps.head_i, steps.parity = 1, parity or {}
    return base, steps.record(1)


def test_compare_calls_a_5x_speedup_without_parity_suspicious_and_names_it_first(tmp_path):
    base, new = pair(tmp_path, 0.2)
    comp = compare(base, new, threshold=0.10)
    (case,) = [c for c in comp.cases if c.case_id == PACKED]
    assert case.verdict == SUSPICIOUS_IMPROVEMENT == "suspicious improvement" in WORDS
    assert not case.regression and comp.exit_code == 0 and comp.outcome == "pass"
    assert rule.REASON in case.reason
    line = fmt.verdict_line(comp)
    assert line.startswith("**SUSPICIOUS IMPROVEMENT** against") and PACKED in line
    assert fmt.tally(comp).startswith("1 suspicious improvement (")
    from mibench.harness.report.changes import compare_json, compare_markdown

    data = json.loads(compare_json(comp))
    assert "suspicious improvement" in compare_markdown(comp)
    assert {c["case_id"]: c["verdict"] for c in data["cases"]}[PACKED] == SUSPICIOUS_IMPROVEMENT


def test_compare_keeps_improvement_when_the_new_sides_parity_vouches(tmp_path):
    base, new = pair(tmp_path, 0.2, {PACKED: "passed"})
    (case,) = [c for c in compare(base, new, threshold=0.10).cases if c.case_id == PACKED]
    assert case.verdict == IMPROVEMENT
    base, new = pair(tmp_path, 0.2, {PACKED: "failed"})  # ran, did not pass: suspicious
    (case,) = [c for c in compare(base, new, threshold=0.10).cases if c.case_id == PACKED]
    assert case.verdict == SUSPICIOUS_IMPROVEMENT


def test_compare_below_2x_is_a_plain_improvement(tmp_path):
    base, new = pair(tmp_path, 0.6)
    (case,) = [c for c in compare(base, new, threshold=0.10).cases if c.case_id == PACKED]
    assert case.verdict == IMPROVEMENT


def _ab_case(change: float, engine: str = "jax") -> ABCase:
    return ABCase(case_id=PACKED, engine=engine, mode="packed", params={},
                  model="embedded:tiny", dtype="float32", tp=1,
                  workload={"label_token_ids": [198]},
                  timing=Timing(method="paired t", rounds=5, change=change, low=change - 0.05,
                                high=change + 0.05, p_value=0.001, alpha=0.01,
                                min_effect=0.05, verdict=IMPROVEMENT),
                  verdict=IMPROVEMENT, why="faster")


def _modes(status: str) -> ParityCheck:
    return ParityCheck(check="modes", case_id=PACKED, against="jax/single/tp=1",
                       tolerance=1e-5, max_log_diff=2e-6, status=status)


def test_ab_applies_the_same_rule_with_the_new_revisions_parity():
    fast, slow = _ab_case(-0.6), _ab_case(-0.3)
    assert vouch.candidates([fast, slow]) == [PACKED]
    vouch.judge([fast, slow], [])
    assert fast.verdict == SUSPICIOUS_IMPROVEMENT and "none ran" in fast.why
    assert slow.verdict == IMPROVEMENT  # below 2x: untouched
    vouched, failed = _ab_case(-0.6), _ab_case(-0.6)
    vouch.judge([vouched], [_modes("passed")])
    vouch.judge([failed], [_modes("failed")])
    assert vouched.verdict == IMPROVEMENT and "vouches" in vouched.why
    assert failed.verdict == SUSPICIOUS_IMPROVEMENT and "modes failed" in failed.why
    server = _ab_case(-0.6, engine="http")
    vouch.judge([server], [])
    assert server.verdict == SUSPICIOUS_IMPROVEMENT and "servers" in server.why
    from mibench.harness.ab.rounds import exit_code, overall
    from mibench.harness.records import ABRecord

    record = ABRecord.model_construct(cases=[fast], verdict=None)
    assert overall(record) == "pass"
    record.verdict = overall(record)
    assert exit_code(record) == 0

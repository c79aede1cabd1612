"""`mibench ab` says how its change is computed where it differs from new ms / base ms: the
paired statistic (the geometric mean of the per-round ratios, judge/paired.py) with the
rounds' ratios, beside the ratio of the medians, on screen and in Markdown."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from mibench.harness.judge.paired import paired_test
from mibench.harness.records import read_artifact
from mibench.harness.records.ab import ABCase, ABRecord, RoundSample, Side, Timing
from mibench.harness.report import ab as ab_report
from mibench.harness.stats.describe import round_log_ratio

NEW = Path(__file__).parent / "data" / "reports" / "new.json"
# (base ms, new ms) of each round: the load moved between rounds, so the medians of the
# sides come from different rounds (41.43 and 161.07 ms) while every round is 2.3x to 4x
ROUNDS = [(20.0, 50.0), (30.0, 70.0), (41.43, 165.0), (65.0, 161.07), (80.0, 200.0)]


def record(rounds, pacing="sides") -> ABRecord:
    samples = {side: [RoundSample(round=r, first=r % 2 == k, status="ok",
                                  timed_s=[ms[k] / 1e3] * 3, median_s=ms[k] / 1e3)
                      for r, ms in enumerate(rounds)] for k, side in enumerate(("base", "new"))}
    d = [round_log_ratio([b / 1e3], [n / 1e3], interleaved=False) for b, n in rounds]
    timing = paired_test(d)
    case = ABCase(case_id="torch/single/tp=1", engine="torch", mode="single", params={},
                  model="embedded:tiny", dtype="float32", tp=1,
                  workload={"label_token_ids": [1]}, **samples,
                  timing=Timing(**timing.as_dict(), round_log_ratios=d),
                  verdict=timing.verdict, why=timing.line())
    return ABRecord(run_id="ab-1", started_at="2026-02-12T03:00:00Z", config={},
                    config_sha256="0" * 64, provenance=read_artifact(NEW).provenance,
                    base=Side(rev="a", commit="a" * 40, subject="base"),
                    new=Side(rev="b", commit="b" * 40, subject="new"), rounds=len(rounds),
                    cases=[case], verdict="regression", pacing=pacing)


def test_the_paired_change_is_explained_beside_the_ratio_of_the_medians():
    rec = record(ROUNDS)
    paired = math.exp(statistics.fmean(math.log(n / b) for b, n in ROUNDS)) - 1
    assert f"{paired:+.1%}" == "+170.2%"  # what the table's change column shows
    line = ("torch/single/tp=1: +170.2% = the geometric mean of the 5 per-round ratios "
            "new/base (x2.50, x2.33, x3.98, x2.48, x2.50) - 1 (a round's ratio: new median / "
            "base median); the ratio of the medians, 161.07 / 41.43 ms, would be +288.8%")
    text = ab_report.render_text(rec)
    assert "  +170.2% [+72.2%, +324.0%]" in text
    assert "41.43" in text and "161.07" in text  # the columns the reader divides
    assert ab_report.FIGURE_HEAD in text and line in text
    md = ab_report.render_markdown(rec)
    assert ab_report.FIGURE_HEAD in md and f"- {line}" in md


def test_many_rounds_show_their_range_and_calls_name_their_pairing():
    rounds = ROUNDS + [(50.0, 120.0), (45.0, 110.0)]
    line = ab_report.figure_line(record(rounds, "calls").cases[0], "calls")
    assert "the 7 per-round ratios new/base (x2.33 to x3.98)" in line
    assert "the median of its paired calls' ratios" in line


def test_nothing_added_when_both_figures_agree():
    rec = record([(40.0, 80.0), (41.0, 82.0), (42.0, 84.0)])
    assert ab_report.figure_lines(rec) == []
    assert ab_report.FIGURE_HEAD not in ab_report.render_text(rec)

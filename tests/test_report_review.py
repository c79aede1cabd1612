"""What a reviewer reads: one convention for change (time new / base, + = slower) in every
command, honest verdict words, the `--summary` budget, constant columns said once, a
speedup matrix without reciprocals, "Fastest" only when significant, a short A/B title,
and plots that carry the verdict."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path

import pytest

from mibench.harness.judge.compare import compare
from mibench.harness.judge.history import build_history
from mibench.harness.judge.paired import paired_test
from mibench.harness.records import read_artifact
from mibench.harness.records.ab import ABCase, ABRecord, RoundSample, Side, Timing
from mibench.harness.report import SUMMARY_LINES, build_context, plots, render_summary, trends
from mibench.harness.report import ab as ab_report
from mibench.harness.report.changes import compare_markdown, history_tables
from mibench.harness.report.fmt import CONVENTION, Table
from mibench.harness.report.groups import speedups
from mibench.harness.report.marks import StepMark
from mibench.harness.report.tables import rows_of
from mibench.harness.verdicts import legacy_verdict

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def pair():
    return read_artifact(DATA / "base.json"), read_artifact(DATA / "new.json")


def slower(rec, factor, case_id=None):
    out = rec.model_copy(deep=True)
    for c in out.cases:
        if c.status == "ok" and case_id in (None, c.case_id):
            make.set_times(c, [t * factor for t in c.timed_s])
    return out


# --- one convention: unit and sign ------------------------------------------------------


def test_compare_reports_time_new_over_base_plus_is_slower(pair):
    _, new = pair
    case = "jax/chunked/chunk_size=32/tp=1"
    comp = compare(new, slower(new, 2.0, case))
    c = next(c for c in comp.cases if c.case_id == case)
    assert c.latency_change == pytest.approx(1.0, abs=0.01) and c.latency_low > 0
    assert c.new_ms_per_item / c.base_ms_per_item == pytest.approx(1 + c.latency_change)
    assert c.items_per_s_change == pytest.approx(-0.5, abs=0.01)  # items/s: + = faster
    md = compare_markdown(comp)
    assert "| Time change [interval] |" in md and "+100.0% [" in md and CONVENTION in md


def test_ab_reports_time_new_over_base_plus_is_slower():
    v = paired_test([math.log(2.0)] * 4 + [math.log(2.1)])
    assert v.change > 0.9 and v.low > 0 and v.verdict == "regression"
    assert "+ = slower" in " ".join(ab_report.HEADER) and "+ = slower" in ab_report.CONVENTION


def test_history_change_points_are_time_plus_is_slower(tmp_path, pair):
    base, _ = pair
    records = []
    for k, factor in enumerate([1.0, 1.01, 0.99, 1.0, 1.5, 1.51, 1.49, 1.5]):
        r = slower(base, factor)
        r.run_id = f"r{k}"
        r.provenance.git.commit = f"{k:07d}" + "0" * 33
        r.started_at = f"2026-02-{k + 1:02d}T00:00:00Z"
        records.append(r)
    hist = build_history(records, "jax/chunked/chunk_size=32/tp=1")
    (cp,) = hist.series[0].change_points
    assert cp.latency_change == pytest.approx(0.5, abs=0.02) and cp.items_per_s_change < 0
    summary, _ = history_tables(hist)
    assert "time +50.0%" in summary.rows[0][-2] and "+ = slower" in summary.note


# --- honest verdict words ---------------------------------------------------------------


def test_ab_stores_inconclusive_when_its_interval_reaches_beyond_and_reads_old_no_change():
    wide, tight = paired_test([0.2, -0.2, 0.1, -0.1]), paired_test([0.01, -0.01, 0.0, 0.005])
    assert wide.verdict == "inconclusive" and tight.verdict == "unchanged"  # stored as shown
    # an ab/2 artifact's `no change` reads as the word it meant
    assert legacy_verdict("no change", wide.low, wide.high, wide.min_effect) == "inconclusive"
    assert legacy_verdict("no change", tight.low, tight.high, tight.min_effect) == "unchanged"
    assert legacy_verdict("regression", wide.low, wide.high, 0.05) == "regression"


# --- the report a reviewer reads --------------------------------------------------------


def big_pair(pair, cases=60):
    """A baseline and a new artifact of `cases` cases, two of them 2x slower."""
    base, new = pair
    ok = [c for c in base.cases if c.status == "ok" and len(c.timed_s) >= 3]
    out = []
    for rec in (base, new):
        r = rec.model_copy(deep=True)
        src = {c.case_id: c for c in r.cases}
        r.cases = []
        for k in range(cases):
            c = src[ok[k % len(ok)].case_id].model_copy(deep=True)
            c.case_id = f"{c.case_id}/copy={k}"
            r.cases.append(c)
        out.append(r)
    out[1] = slower(out[1], 2.0, out[1].cases[3].case_id)
    out[1] = slower(out[1], 2.0, out[1].cases[7].case_id)
    return out


@pytest.mark.parametrize("with_baseline", [True, False])
def test_summary_fits_a_pr_comment(pair, with_baseline):
    base, new = big_pair(pair)
    ctx = build_context([new], baseline=base if with_baseline else None)
    text = render_summary(ctx)
    assert len(text.splitlines()) <= SUMMARY_LINES == 40
    assert "more case(s) in the full report" in text
    if with_baseline:
        assert text.splitlines()[2].startswith("**REGRESSION**")
        rows = [ln for ln in text.splitlines() if "| **regression** |" in ln]
        assert len(rows) == 2  # the regressions come first, whatever is cut


def test_constant_columns_are_said_once_above_the_table():
    t = Table(["Hardware", "Mode", "Status", "Options"],
              [["CPU", "single", "ok", "-"], ["CPU", "packed", "ok", "-"]])
    lifted = t.lift_constant(["Hardware", "Status", "Options", "Mode"])
    assert lifted.header == ["Mode"] and lifted.facts == ["Hardware: CPU", "Status: ok"]
    assert t.lift_constant(["Mode"]).header == t.header  # varies: stays


def test_speedup_matrix_is_not_half_reciprocal(pair):
    _, new = pair
    for t in speedups(rows_of([new])):
        cells = [c for row in t.rows for c in row[2:] if c]
        assert cells and all(float(c.rstrip("x")) >= 1.0 for c in cells)
        assert len(t.rows) == len(t.header) - 2  # the slowest mode is only a column


def test_fastest_only_when_the_difference_is_significant(pair):
    _, new = pair
    text = render_summary(build_context([new]))
    assert "Fastest: not decided" in text  # 1,011 vs 959 items/s: within the noise
    quick = new.model_copy(deep=True)
    fast = next(c for c in quick.cases if c.case_id.startswith("jax/prefill_extend/extend_"
                                                                  "batch_size=16") and
                c.case_id.endswith("tp=4"))
    make.set_times(fast, [t / 3 for t in fast.timed_s])
    text = render_summary(build_context([quick]))
    assert re.search(r"Fastest: jax/prefill_extend/extend_batch_size=16\S* \(.*faster than",
                     text)


def test_environment_is_folded_and_no_time_for_n_items(pair):
    base, new = pair
    from mibench.harness.report import render

    text = render(build_context([new], baseline=base))
    env = text.split("## Environment\n", 1)[1]
    assert env.lstrip().startswith("<details><summary>Environment (")
    assert "Time for" not in text


def ab_record(subject: str) -> ABRecord:
    timing = paired_test([0.2, -0.15, 0.1, -0.1])
    case = ABCase(case_id="jax/single/tp=1", engine="jax", mode="single", params={},
                  model="embedded:tiny", dtype="float32", tp=1, workload={"label_token_ids": [1]},
                  base=[RoundSample(round=0, first=True, status="ok", timed_s=[0.1],
                                    median_s=0.1)],
                  new=[RoundSample(round=0, first=False, status="ok", timed_s=[0.11],
                                   median_s=0.11)],
                  timing=Timing(**timing.as_dict()), verdict=timing.verdict, why=timing.line())
    return ABRecord(run_id="ab-1", started_at="2026-02-12T03:00:00Z", config={},
                    config_sha256="0" * 64, provenance=read_artifact(DATA / "new.json")
                    .provenance, base=Side(rev="a", commit="a" * 40, subject=subject),
                    new=Side(rev="b", commit="b" * 40, subject="short"), rounds=4,
                    cases=[case], verdict="pass")


def test_ab_title_is_short_and_the_columns_are_explained():
    md = ab_report.render_markdown(ab_record("word " * 60))
    title = md.splitlines()[0]
    assert title == "# A/B: aaaaaaaa vs bbbbbbbb"
    assert max(len(line) for line in md.splitlines()[:3]) < 200 and "…" in md
    assert "| inconclusive |" in md and "geometric mean of the rounds' new/base" in md


# --- plots that carry the verdict -------------------------------------------------------


@pytest.mark.slow
def test_comparison_and_history_plots(tmp_path, pair):
    base, new = pair
    ctx = build_context([slower(new, 2.0, "jax/chunked/chunk_size=32/tp=1")], baseline=base)
    from mibench.harness.report import draw_plots

    made = draw_plots(ctx, tmp_path / "r.md")
    for name in ("throughput", "commits"):
        assert (tmp_path / made[name]).read_bytes()[:8] == PNG
    assert plots.verdict_class("regression") == "regressed"
    assert plots.verdict_class("inconclusive") == "inconclusive"
    trend = trends.Trend("a/b", ["c1", "c2 #1", "c2 #2"], [10.0, None, 12.0],
                         [(9.0, 11.0), None, (11.0, 13.0)],
                         [StepMark(2, -0.2, "change point", "improvement")])
    path = trends.history_chart("cfg", [trend, trend], tmp_path / "h.png")
    assert path.read_bytes()[:8] == PNG


# --- maintained libraries in place of hand-written parts: the figures did not change ------


def _old_table(header, rows):
    """report/console.py's hand-written table before rich's."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]

    def line(r):
        return "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])


def test_rich_console_tables_show_the_same_figures(pair):
    from mibench.harness.report.console import table

    _, new = pair
    header = ["case", "status", "items/s", "ms/item"]
    rows = [[c.case_id, c.status, f"{c.metrics.throughput_items_per_s.median:.2f}"
             if c.metrics.throughput_items_per_s else "-", "1.5"] for c in new.cases]
    def cells(text):
        return [ln.split() for ln in text.splitlines() if not set(ln) <= set("-─ ")]
    assert cells(table(header, rows)) == cells(_old_table(header, rows))
    narrow = table(header, rows, width=60)  # a terminal of 60 columns: the ids wrap
    assert max(len(ln) for ln in narrow.splitlines()) <= 60


def test_numpy_percentiles_are_the_nearest_rank_ones():
    import random

    from mibench.harness.stats.describe import nearest_rank

    rng = random.Random(7)
    for n in (1, 2, 3, 10, 99, 100, 101, 1000):
        values = [rng.lognormvariate(0, 1) for _ in range(n)]
        ordered = sorted(values)
        for p in (50, 90, 99, 100):
            assert nearest_rank(values, p) == ordered[max(1, math.ceil(p / 100 * n)) - 1]


def test_the_report_names_the_peak_and_mfu_has_one_decimal(pair):
    from mibench.harness.report.tables import results_matrix

    _, new = pair
    t = results_matrix(rows_of([new]))
    assert "peak bfloat16 918 TFLOP/s (vendor)" in t.note
    mfu = [r[t.header.index("MFU")] for r in t.rows]
    assert all(re.fullmatch(r"\d+\.\d%|<0\.1%|-", m) for m in mfu) and "0.4%" in mfu
    busy = new.model_copy(deep=True)
    busy.provenance.devices.peak_flops = {}
    busy.provenance.devices.peak_source = "unknown, so MFU is not computed: ..."
    for c in busy.cases:
        c.metrics.mfu = None
    t = results_matrix(rows_of([busy]))
    assert "peak unknown, so MFU is unknown (unknown, so MFU is not computed" in t.note

"""What the plots show (harness/report/marks.py, plots.py, trends.py): a log axis past a 30x
span, steps only where the detection found one between commits, and a busy run marked on
every kind of plot that shows runs (inspected on the figure, before it is saved)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mibench.harness.report import plots, trends
from mibench.harness.report.marks import (
    StepMark,
    axis_label,
    commit_groups,
    count_text,
    drawn_steps,
    log_scale,
    subject,
)

RED = plots.VERDICT_COLOURS["regressed"]


def test_log_scale_past_a_30x_span_only():
    assert log_scale([1.53, 549.0])  # the user's torch bar beside jax
    assert not log_scale([10.0, 200.0])
    assert not log_scale([1.0, 30.0])  # exactly 30x stays linear
    assert log_scale([None, 0.0, 1.0, 31.0])  # gaps and zeros are not plotted values
    assert not log_scale([None, 0.0])
    assert axis_label("items/s (higher is faster)", True) == \
        "items/s (higher is faster; log scale)"
    assert axis_label("items/s", True) == "items/s (log scale)"
    assert axis_label("items/s", False) == "items/s"


def test_subject_and_counts():
    assert subject(["demo", "demo"], ["11111111", "22222222"]) == "demo @ 11111111 vs 22222222"
    assert count_text([5, 5, None]) == "n=5" and count_text([3, 5]) == "n=3-5"
    assert count_text([None]) == ""


def test_commit_groups_are_neighbouring_runs_of_one_commit():
    assert commit_groups(["a", "b", "b", "c", "b"]) == [0, 1, 1, 2, 3]
    assert commit_groups([]) == []


def cp(index, change, kind="change point", verdict="regression"):
    return StepMark(index, change, kind, verdict)


def test_no_step_between_two_runs_of_one_commit():
    commits = ["a", "b", "c", "c", "d"]
    # the user's case: c's first run busy and 2.4x slower, its second quiet: the detection
    # suspects two steps, both inconclusive (a busy side), and one of them is inside c
    quiet = [True, True, False, True, True]
    steps = [cp(2, 1.44, "suspected step", "inconclusive"),
             cp(3, -0.59, "suspected step", "inconclusive")]
    assert drawn_steps(steps, commits, quiet) == []
    # a step judged between two quiet runs of one commit is still the same code
    both = [True] * 5
    assert drawn_steps([cp(3, -0.59, "suspected step", "improvement")], commits, both) == []
    assert drawn_steps([cp(3, 0.5)], commits, both) == []


def test_a_found_step_between_commits_is_drawn():
    commits = ["a", "b", "c", "c", "d"]
    quiet = [True, True, False, True, True]
    # c's quiet run is compared with b's (its busy first run is no evidence): a real step
    assert drawn_steps([cp(3, 0.6)], commits, quiet) == [cp(3, 0.6)]
    judged = cp(4, -0.5, "suspected step", "improvement")
    assert drawn_steps([judged], commits, quiet) == [judged]
    undecided = cp(4, -0.5, "suspected step", "inconclusive")
    assert drawn_steps([undecided], commits, quiet) == []


@pytest.fixture
def drawn(monkeypatch):
    """The figures the plot functions would save, kept open for inspection."""
    figs = []

    def keep(fig, path, layout=True):
        figs.append(fig)
        return path

    monkeypatch.setattr(plots, "save_png", keep)
    monkeypatch.setattr(trends, "save_png", keep)
    yield figs
    for fig in figs:
        plots.pyplot().close(fig)


def texts(fig) -> str:
    import matplotlib.text

    return " | ".join(t.get_text() for t in fig.findobj(matplotlib.text.Text))


def hatched(fig) -> list:
    """The hatched bars (a legend's patches are not on the axes)."""
    return [p for ax in fig.axes for p in ax.patches if p.get_hatch() == plots.BUSY_HATCH]


def bars(busy: list[bool], baseline=False, values=(1.53, 549.0)) -> plots.Bars:
    return plots.Bars("new", list(values), [None, None], [None, None], baseline=baseline,
                      counts=[3, 5], busy=busy)


def test_throughput_marks_busy_uses_log_and_says_n_and_subject(drawn):
    plots.throughput_chart(["torch", "jax"], [bars([False, False], True), bars([True, False])],
                           Path("t.png"), "demo @ 11111111 vs 22222222")
    plots.throughput_chart(["torch", "jax"], [bars([False, False], values=(10.0, 20.0))],
                           Path("u.png"))
    fig, quiet = drawn
    assert len(hatched(fig)) == 1 and not hatched(quiet)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and "log scale" in ax.get_xlabel()
    assert quiet.axes[0].get_xscale() == "linear"
    assert "1.53 n=3 busy" in texts(fig) and plots.BUSY_LABEL in texts(fig)
    assert ax.get_title().startswith("demo @ 11111111 vs 22222222")


def test_comparison_marks_busy_on_both_panels(drawn):
    change = plots.Change("new", [0.02, 0.01], [-0.1, -0.1], [0.1, 0.1], [None, None],
                          busy=[True, False])
    plots.comparison_chart(["torch", "jax"], [bars([False, False], True), bars([True, False])],
                           [change], Path("c.png"), 0.05, subject="demo @ a vs b")
    (fig,) = drawn
    assert len(hatched(fig)) == 1
    hollow = [ln for ln in fig.axes[1].get_lines() if ln.get_markerfacecolor() == "white"]
    assert len(hollow) == 1 and "+2.0% busy" in texts(fig)
    assert "demo @ a vs b" in texts(fig)


def test_spread_marks_busy(drawn):
    plots.spread_chart(["torch", "jax"], [[1.0, 1.1, 0.9], [2.0, 2.1]], Path("s.png"),
                       busy=[True, False], subject="demo @ a")
    (fig,) = drawn
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert "torch (n=3, busy)" in labels and "jax (n=2)" in labels
    assert fig.axes[0].get_title() == "demo @ a: run-to-run spread"


def test_history_groups_one_commits_runs_rings_busy_and_draws_only_found_steps(drawn):
    t = trends.Trend("jax", ["a", "b", "c #1", "c #2", "d"], [100.0, 101.0, 41.0, 100.0, 60.0],
                     [None] * 5,
                     [StepMark(2, 1.44, "suspected step", "inconclusive"),
                      StepMark(3, -0.59, "suspected step", "inconclusive"),
                      StepMark(4, 0.66, "change point", "regression")],
                     busy=[2], commits=["a", "b", "c", "c", "d"], counts=[5] * 5)
    trends.history_chart("demo @ a .. d", [t], Path("h.png"))
    (fig,) = drawn
    ax = fig.axes[0]
    steps = [ln for ln in ax.get_lines() if ln.get_linestyle() in ("--", ":")]
    assert [ln.get_xdata()[0] for ln in steps] == [2.5]  # c -> d only, at c's position
    rings = [ln for ln in ax.get_lines() if ln.get_markerfacecolor() == "none"
             and ln.get_markeredgecolor() == RED]
    assert [list(ln.get_ydata()) for ln in rings] == [[41.0]]
    ticks = [lab.get_text() for lab in ax.get_xticklabels()]
    assert ticks == ["a", "b", "c x2", "d"] and "(n=5 timed runs a point)" in ax.get_title()
    assert "+66% time" in texts(fig) and "-59%" not in texts(fig)


def test_latency_cdf_and_capacity_name_a_busy_case(drawn, monkeypatch):
    from types import SimpleNamespace

    from mibench.harness.records import SloStep
    from mibench.harness.records.busy import CaseLoad
    from mibench.harness.under_test import report_latency as latency
    from mibench.harness.under_test import report_servers as servers

    monkeypatch.setattr(latency, "save_png", lambda fig, path: drawn.append(fig) or path)
    monkeypatch.setattr(servers, "save_png", lambda fig, path: drawn.append(fig) or path)
    load = CaseLoad(window_s=1.0, cpus=2, other_share=0.7, other_cpu_s=1.4, source="test")
    asked = [SimpleNamespace(latency_s=s, status=200) for s in (0.001, 0.002, 0.5)]
    steps = [SloStep(rate=r, seed=0, sent=9, ok=9, error_rate=0.0, stopped_early=False,
                     percentile_ms=10.0 * r, p50_ms=5.0 * r, meets=True, why="")
             for r in (5.0, 10.0)]
    slo = SimpleNamespace(steps=steps, repeats=[], percentile=90, budget_ms=150, rate=10.0,
                          status="found")
    rows = [SimpleNamespace(run="r", case=SimpleNamespace(
        case_id=f"http/{k}", http=SimpleNamespace(requests=asked), slo=slo, load=load_))
        for k, load_ in (("busy", load), ("quiet", None))]
    latency.cdf_chart(rows, Path("l.png"), "demo @ a")
    servers.capacity_chart(rows, Path("c.png"), "demo @ a")
    cdf, capacity = drawn
    legend = [t.get_text() for t in cdf.axes[0].get_legend().get_texts()]
    assert legend == ["http/busy (n=3, busy machine)", "http/quiet (n=3)"]
    assert cdf.axes[0].get_xscale() == "log" and "log scale" in cdf.axes[0].get_xlabel()
    assert cdf.axes[0].get_title().startswith("demo @ a: ")
    legend = [t.get_text() for t in capacity.axes[0].get_legend().get_texts()]
    assert any("(busy machine)" in t for t in legend) and sum("busy" in t for t in legend) == 1
    assert capacity.axes[0].get_title().startswith("demo @ a: ")


def test_the_scaling_plot_names_a_tp_measured_busy(drawn):
    from mibench.harness.records import read_artifact
    from mibench.harness.records.busy import CaseLoad
    from mibench.harness.report.groups import topology_lines
    from mibench.harness.report.tables import rows_of

    rec = read_artifact(Path(__file__).parent / "data" / "reports" / "base.json")
    (case,) = [c for c in rec.cases if c.case_id == "jax/single/tp=4"]
    case.load = CaseLoad(window_s=1.0, cpus=2, other_share=0.7, other_cpu_s=1.4, source="t")
    lines = topology_lines(rows_of([rec]))
    busy = [name for name in lines if "busy" in name]
    assert len(busy) == 1 and busy[0].endswith("(busy machine at tp=4)")
    plots.scaling_chart(lines, Path("s.png"), "demo @ 11111111")
    (fig,) = drawn
    assert busy[0] in texts(fig) and fig.axes[0].get_title().startswith("demo @ 11111111: ")


def test_the_site_trend_draws_the_same_steps():
    from types import SimpleNamespace

    from mibench.harness.report.site.pages import plotted_steps

    runs = [SimpleNamespace(items_per_s=v, busy=b, commit=c, short=c[:8])
            for v, b, c in [(100.0, False, "a"), (41.0, True, "c"), (100.0, False, "c"),
                            (60.0, False, "d")]]
    steps = [StepMark(1, 1.44, "suspected step", "inconclusive"),
             StepMark(2, -0.59, "suspected step", "inconclusive"),
             StepMark(3, 0.66, "change point", "regression")]
    got = plotted_steps(SimpleNamespace(runs=runs, steps=steps))
    assert [s.index for s in got] == [3]

"""The history's trend plot (`mibench history --out`): small multiples, a panel per case, a
position per commit (matplotlib, Agg, through plots.py's helpers). `history_plots(hist, out)`
is the renderer (`history-plots`, renderers.py): a `History` in, a figure per config beside
`out`.

A commit's runs share its position: each run a dot (ringed red when measured on a busy
machine), their spread a grey bar, the line through the median of its quiet runs (of all,
when every one was busy). Steps are drawn where marks.drawn_steps says: a change point
(dashed) or a suspected step judged a regression or an improvement (dotted), never between
two runs of one commit. A panel's values spanning more than 30x get a log axis that says so.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

from ..judge.history import History, Series
from .changes import point_labels
from .marks import StepMark, axis_label, commit_groups, count_text, drawn_steps, log_scale
from .plots import PLAIN, VERDICT_COLOURS, WIDTH, pyplot, save_png, wrap

RUN_OFFSET = 0.09  # x offset between the dots of one commit's runs, in commit positions


@dataclasses.dataclass(frozen=True)
class Trend:
    """One measurement's series: per point (one run) its commit label, median items/s
    (None: not ok, or missing: a gap) and whisker; the steps harness.judge.steps found
    (marks.StepMark, index into the points); the points that failed and those measured on
    a busy machine; each point's commit (default: its label) and timed runs (n)."""

    name: str
    labels: list[str]
    values: list[float | None]
    whiskers: list[tuple[float, float] | None]
    steps: list[StepMark] = dataclasses.field(default_factory=list)
    failed: list[int] = dataclasses.field(default_factory=list)
    busy: list[int] = dataclasses.field(default_factory=list)
    commits: list[str] = dataclasses.field(default_factory=list)
    counts: list[int | None] = dataclasses.field(default_factory=list)

    @property
    def quiet(self) -> list[bool]:
        """Per point: a value measured on a machine that was not busy."""
        return [v is not None and i not in self.busy for i, v in enumerate(self.values)]


def centres(t: Trend, groups: list[int]) -> list[float | None]:
    """Per commit position, the median of its quiet runs' values (of all its runs when
    every one was busy; None: no value)."""
    out = []
    for g in range(groups[-1] + 1 if groups else 0):
        quiet = [v for i, v in enumerate(t.values) if groups[i] == g and t.quiet[i]]
        every = [v for i, v in enumerate(t.values) if groups[i] == g and v is not None]
        out.append(statistics.median(quiet or every) if every else None)
    return out


def _line(ax, ys: list[float | None]) -> None:
    """The commits' centres joined, a gap (missing, failed) breaking the line."""
    run: list[int] = []
    for g, y in enumerate([*ys, None]):
        if y is not None:
            run.append(g)
            continue
        if run:
            ax.plot(run, [ys[i] for i in run], "-", color=PLAIN, lw=1.2)
        run = []


def _panel(ax, t: Trend) -> None:
    commits = t.commits or t.labels
    groups = commit_groups(commits)
    ys = centres(t, groups)
    _line(ax, ys)
    for g in set(groups):
        members = [i for i, v in enumerate(t.values) if groups[i] == g and v is not None]
        if len(members) > 1:  # one commit's runs: their spread
            vals = [t.values[i] for i in members]
            ax.plot([g, g], [min(vals), max(vals)], color="#bbbbbb", lw=5, alpha=0.6,
                    solid_capstyle="butt")
        for k, i in enumerate(members):
            x = g + RUN_OFFSET * (k - (len(members) - 1) / 2)
            lo, hi = t.whiskers[i] or (t.values[i], t.values[i])
            ax.errorbar([x], [t.values[i]], yerr=[[t.values[i] - lo], [hi - t.values[i]]],
                        fmt="o", color=PLAIN, ms=4, capsize=2, ecolor="#999999",
                        elinewidth=0.8)
            if i in t.busy:
                ax.plot([x], [t.values[i]], "o", mfc="none",
                        mec=VERDICT_COLOURS["regressed"], ms=9)
    for i in t.failed:
        ax.axvspan(groups[i] - 0.3, groups[i] + 0.3, color="#f2dede", lw=0)
        ax.text(groups[i], 0.05, "failed", ha="center", fontsize=6, rotation=90,
                transform=ax.get_xaxis_transform())
    for s in drawn_steps(t.steps, commits, t.quiet):
        col = VERDICT_COLOURS["regressed" if s.change > 0 else "improved"]
        at = groups[s.index] - 0.5
        ax.axvline(at, color=col, ls="--" if s.kind == "change point" else ":", lw=1.2)
        ax.text(at + 0.05, 0.97, f"{s.change:+.0%} time", color=col, fontsize=7, va="top",
                transform=ax.get_xaxis_transform())
    _axes(ax, t, commits, groups)


def _axes(ax, t: Trend, commits: list[str], groups: list[int]) -> None:
    ends = [e for v, w in zip(t.values, t.whiskers, strict=True) if v is not None
            for e in (v, *(w or ()))]
    log = log_scale(ends)
    if log:
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, max(ends) * 1.25)
    firsts = {g: i for i, g in reversed(list(enumerate(groups)))}
    runs = {g: groups.count(g) for g in firsts}
    names = [t.labels[firsts[g]].split(" #")[0] + (f" x{runs[g]}" if runs[g] > 1 else "")
             for g in sorted(firsts)]
    step = max(1, -(-len(names) // 16))  # every commit up to 16 positions a panel
    ticks = list(range(0, len(names), step))
    ax.set_xticks(ticks, [names[g] for g in ticks], rotation=35, ha="right", fontsize=6.5)
    ax.set_xlim(-0.5, len(names) - 0.5)
    n = count_text(t.counts)
    ax.set_title(wrap(t.name, 48) + (f" ({n} timed runs a point)" if n else ""), fontsize=8)
    ax.set_ylabel(axis_label("items/s", log), fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(axis="y", color="#eeeeee", lw=0.6)


def history_chart(title: str, trends: list[Trend], path: Path,
                  columns: int = 2) -> Path | None:
    """One figure of small multiples, a panel per case, `title` (config and commits) above:
    median items/s per commit (whiskers: slowest to fastest run; `xN`: N runs of that
    commit), steps coloured by direction with the change of time per item."""
    trends = [t for t in trends if any(v is not None for v in t.values)]
    if not trends:
        return None
    plt = pyplot()
    from matplotlib.lines import Line2D

    cols = min(columns, len(trends))
    rows = -(-len(trends) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 0.6 + 2.4 * rows), squeeze=False)
    for ax, t in zip(axes.flat, trends, strict=False):
        _panel(ax, t)
    for ax in list(axes.flat)[len(trends):]:
        ax.set_visible(False)
    marks = [Line2D([], [], color=VERDICT_COLOURS["regressed"], ls="--",
                    label="change point: slower"),
             Line2D([], [], color=VERDICT_COLOURS["improved"], ls="--",
                    label="change point: faster"),
             Line2D([], [], color=PLAIN, ls=":", label="step judged (2x)"),
             Line2D([], [], color=PLAIN, marker="o", label="run (whiskers: its timed runs)"),
             Line2D([], [], color="#bbbbbb", lw=5, alpha=0.6, label="runs of one commit"),
             Line2D([], [], ls="", marker="o", mfc="none",
                    mec=VERDICT_COLOURS["regressed"], label="busy machine")]
    fig.suptitle(title, fontsize=10, x=0.01, y=0.995, ha="left", va="top")
    # the legend on a line of its own under the title (six marks do not fit beside it)
    top = 1 - 0.5 / fig.get_figheight()
    fig.legend(handles=marks, loc="upper left", fontsize=7, ncol=6,
               bbox_to_anchor=(0.0, top), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    return save_png(fig, path, layout=False)


def trend(s: Series, busy_level: float) -> Trend:
    """A series as the trend plot draws it (report/trends.py)."""
    return Trend(
        name=s.case_id + (f" [{s.label}]" if s.label else ""),
        labels=point_labels(s.points),
        values=[p.items_per_s for p in s.points],
        whiskers=[(p.items_per_s_min, p.items_per_s_max)
                  if p.items_per_s_min is not None else None for p in s.points],
        steps=[StepMark(st.index, st.latency_change, st.kind, st.verdict) for st in s.steps],
        failed=[i for i, p in enumerate(s.points) if p.status == "failed"],
        busy=[i for i, p in enumerate(s.points) if p.busy(busy_level)],
        commits=[p.commit or p.label for p in s.points],
        counts=[sum(map(len, p.runs)) or None for p in s.points])


def history_plots(hist: History, out: Path) -> dict[str, str]:
    """One figure of small multiples per config beside `out` (a panel per case):
    config -> file name."""
    made = {}
    stem = out.with_suffix("")
    for k, config in enumerate(hist.configs):
        series = [s for s in hist.series if s.config == config]
        points = [p for s in series for p in s.points]
        commits = list(dict.fromkeys(p.label for p in sorted(points, key=lambda p: p.time)))
        span = commits[0] + (f" .. {commits[-1]}" if len(commits) > 1 else "")
        runs = len({p.run_id for p in points})
        title = (f"{config} @ {span} ({len(commits)} commits, {runs} runs): median items/s "
                 "per commit")
        suffix = "" if len(hist.configs) == 1 else f"-{k + 1}"
        path = history_chart(title, [trend(s, hist.busy_level) for s in series],
                             Path(f"{stem}-trends{suffix}.png"))
        if path is not None:
            made[config] = path.name
    return made

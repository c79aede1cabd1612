"""PNG plots for reports (matplotlib, Agg backend, imported lazily). Each function takes plain
data, writes one file and returns its path, or None when there is nothing to draw.

Every plot carries the verdict, not only the numbers: intervals as error bars, colour by
verdict (`VERDICT_COLOURS`, Paul Tol's colour-blind-safe palette), baseline and new side by
side, bars on linear axes from zero, and a width that GitHub shows without scaling text
away (`WIDTH` inches at `DPI`: about 990 pixels).
"""

from __future__ import annotations

import dataclasses
import statistics
import textwrap
from pathlib import Path

DPI = 110
WIDTH = 9.0  # inches
BASE_COLOUR = "#bbbbbb"  # the baseline (or a run without a verdict): grey
PLAIN = "#4477aa"
# verdict class -> colour; `verdict_class` maps every verdict word to one of them
VERDICT_COLOURS = {"regressed": "#cc3311", "improved": "#009988",
                   "inconclusive": "#ee7733", "unchanged": "#4477aa"}
_CLASS = {"regression": "regressed", "scores moved": "regressed", "failed": "regressed",
          "timed compiles": "regressed", "memory regression": "regressed",
          "missing": "regressed", "improvement": "improved", "unchanged": "unchanged",
          "inconclusive": "inconclusive", "untested": "inconclusive",
          # the nightly's words (harness/verdicts.py NIGHTLY), for the site's marks
          "confirmed regression": "regressed", "known regression": "regressed",
          "cold start regression": "regressed", "suspected regression": "inconclusive",
          "suspicious improvement": "inconclusive", "insufficient data": "inconclusive",
          "pass": "unchanged", "disproved": "unchanged"}


def verdict_class(verdict: str | None) -> str | None:
    """regressed / improved / inconclusive / unchanged, or None (no timing verdict)."""
    return _CLASS.get(verdict or "")


def colour(verdict: str | None) -> str:
    return VERDICT_COLOURS.get(verdict_class(verdict) or "", PLAIN)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path, layout: bool = True) -> Path:
    """The figure as a PNG at `path`, written whole or not at all (records/io.py)."""
    import io

    from ..records.io import write_output

    if layout:
        fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight")  # long case ids inside
    _plt().close(fig)
    write_output(path, png.getvalue(), "the plot")
    return path


def row_inches(labels: list[str], inches: float) -> float:
    """The height of one bar row: `inches`, or more where a wrapped label needs the room
    (about 0.14 in a line at the tick font), so labels of neighbouring rows do not touch."""
    lines = max((wrap(lab).count("\n") + 1 for lab in labels), default=1)
    return max(inches, 0.14 * lines + 0.06)


def wrap(label: str, width: int = 34) -> str:
    """A long case id on two or more lines, broken after a `/` (inside a part only when
    the part alone is longer than `width`)."""
    lines, line = [], ""
    for part in label.replace("/", "/\0").split("\0"):
        if line and len(line) + len(part) > width:
            lines.append(line)
            line = ""
        line += part
    lines.append(line)
    return "\n".join(piece for ln in lines for piece in (textwrap.wrap(ln, width) or [ln]))


def _legend(ax, classes: set[str], base: str = "", **kw) -> None:
    from matplotlib.patches import Patch

    handles = [Patch(color=BASE_COLOUR, label=f"baseline {base}".strip())] \
        if "baseline" in classes else []
    handles += [Patch(color=c, label=k) for k, c in VERDICT_COLOURS.items() if k in classes]
    if handles:
        ax.legend(handles=handles, fontsize=7, **kw)


# --- side-by-side bars with whiskers (throughput, time per item) ----------------------------


@dataclasses.dataclass(frozen=True)
class Bars:
    """One artifact's bars: per case its value (None: not ok), whisker (low, high) and
    verdict (None: the baseline, or no comparison)."""

    name: str
    values: list[float | None]
    whiskers: list[tuple[float, float] | None]
    verdicts: list[str | None]
    baseline: bool = False


def _grouped_bars(ax, labels: list[str], sides: list[Bars], fmt: str) -> set[str]:
    """Horizontal bars, one group per case (first case on top), one bar per side; values
    written at the whisker's end; returns the colour classes used."""
    n, k = len(labels), len(sides)
    height = 0.8 / k
    classes: set[str] = set()
    top = 0.0
    for j, side in enumerate(sides):
        for i, (v, w, verdict) in enumerate(zip(side.values, side.whiskers, side.verdicts,
                                                strict=True)):
            if v is None:
                continue
            y = (n - 1 - i) + 0.4 - height * (j + 0.5)
            col = BASE_COLOUR if side.baseline else colour(verdict)
            classes.add("baseline" if side.baseline else verdict_class(verdict) or "plain")
            err = None if w is None else [[max(v - w[0], 0.0)], [max(w[1] - v, 0.0)]]
            ax.barh(y, v, height=height * 0.92, color=col, xerr=err,
                    error_kw=dict(ecolor="#333333", lw=0.8, capsize=2))
            end = max(v, w[1] if w else v)
            top = max(top, end)
            tag = f"{v:{fmt}}" + (f"  {side.name}" if k > 2 else "")
            ax.text(end, y, " " + tag, va="center", fontsize=6.5)
    ax.set_xlim(0, top * 1.35 if top > 0 else 1)  # room for the value labels, from zero
    ax.set_yticks(range(n), [wrap(lab) for lab in reversed(labels)], fontsize=7.5)
    ax.set_ylim(-0.6, n - 0.4)
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    return classes


def throughput_chart(labels: list[str], sides: list[Bars], path: Path,
                     title: str = "Throughput, items/s (median; whiskers: slowest to "
                                  "fastest timed run)") -> Path | None:
    """Per case, every artifact's median items/s side by side on a linear axis from zero,
    coloured by its verdict against the baseline (grey) when there is one."""
    if not labels or not any(v is not None for s in sides for v in s.values):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH, 0.9 + row_inches(labels, 0.42) * len(labels)
                                    * max(1, len(sides)) ** 0.6))
    classes = _grouped_bars(ax, labels, sides, ".4g")
    ax.set_xlabel("items/s (higher is faster)")
    ax.set_title(title, fontsize=9)
    if classes - {"plain"}:
        _legend(ax, classes, next((s.name for s in sides if s.baseline), ""),
                loc="lower right")
    return _save(fig, path)


@dataclasses.dataclass(frozen=True)
class Change:
    """One compared artifact's change per case: time new / base - 1 (+ = slower), its
    interval and verdict (None where the case has no change)."""

    name: str
    change: list[float | None]
    low: list[float | None]
    high: list[float | None]
    verdicts: list[str | None]


def comparison_chart(labels: list[str], times: list[Bars], changes: list[Change],
                     path: Path, threshold: float, level: str = "99%") -> Path | None:
    """Two panels sharing the cases: left, ms per item of the baseline and each new
    artifact side by side (from zero; whiskers: fastest to slowest run); right, the change
    of time per item with its interval as error bars, coloured by verdict, the threshold
    shaded."""
    if not labels or not any(c is not None for ch in changes for c in ch.change):
        return None
    plt = _plt()
    rows = len(labels) * max(1, len(changes)) ** 0.6
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 1.2 + row_inches(labels, 0.5) * rows),
                                      sharey=True,
                                      gridspec_kw={"width_ratios": [1, 1.15]})
    classes = _grouped_bars(left, labels, times, ".3g")
    left.set_xlabel("ms per item (lower is faster)")
    left.set_title("Time per item: baseline and new", fontsize=9)
    n, k = len(labels), len(changes)
    height = 0.8 / k
    right.axvspan(-100 * threshold, 100 * threshold, color="#f2f2f2", lw=0)
    right.axvline(0, color="#666666", lw=0.8)
    span = 100 * threshold * 1.5
    for j, ch in enumerate(changes):
        for i, (c, lo, hi, verdict) in enumerate(zip(ch.change, ch.low, ch.high, ch.verdicts,
                                                     strict=True)):
            if c is None:
                continue
            y = (n - 1 - i) + 0.4 - height * (j + 0.5)
            classes.add(verdict_class(verdict) or "plain")
            err = None if lo is None else [[100 * (c - lo)], [100 * (hi - c)]]
            right.errorbar(100 * c, y, xerr=err, fmt="o", color=colour(verdict), ms=5,
                           capsize=3, lw=1.4)
            span = max(span, abs(100 * (lo if lo is not None else c)),
                       abs(100 * (hi if hi is not None else c)))
            tag = f"{100 * c:+.1f}%" + (f" {ch.name}" if k > 1 else "")
            right.annotate(tag, (100 * c, y), xytext=(0, 6), textcoords="offset points",
                           ha="center", fontsize=6.5)
    right.set_xlim(-span * 1.12, span * 1.12)
    right.set_xlabel(f"time new / base - 1 (%, + = slower; bars: {level} interval)")
    right.set_title(f"Change (shaded: within the {threshold:.0%} threshold)", fontsize=9)
    right.grid(axis="x", color="#eeeeee", lw=0.6)
    right.tick_params(axis="y", left=False)
    _legend(right, classes, times[0].name if times and times[0].baseline else "", loc="best")
    return _save(fig, path)


# --- spread, scaling --------------------------------------------------------------------


def spread_chart(labels: list[str], runs: list[list[float]], path: Path,
                 factor: float = 1.5) -> Path | None:
    """Each timed run over its case's median; runs above `factor` are tail pauses (red)."""
    data = [(lab, r) for lab, r in zip(labels, runs, strict=True) if len(r) > 1]
    if not data:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(WIDTH, 0.8 + row_inches([lab for lab, _ in data], 0.4)
                                    * len(data)))
    for y, (_, r) in enumerate(reversed(data)):
        med = statistics.median(r)
        rel = [t / med for t in r]
        ax.scatter(rel, [y] * len(rel), s=14,
                   c=[VERDICT_COLOURS["regressed"] if x > factor else PLAIN for x in rel])
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.axvline(factor, color=VERDICT_COLOURS["regressed"], lw=0.8, ls="--",
               label=f"tail pause ({factor}x)")
    ax.set_yticks(range(len(data)), [wrap(lab) for lab, _ in reversed(data)], fontsize=7.5)
    ax.set_xlabel("run time / median")
    ax.set_title("Run-to-run spread", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def scaling_chart(lines: dict[str, dict[int, float]], path: Path) -> Path | None:
    """Items/s against TP per case, with linear scaling from the smallest TP dotted."""
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    plt = _plt()
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(WIDTH, 4))
    for name, by_tp in lines.items():
        tps = sorted(by_tp)
        (line,) = ax.plot(tps, [by_tp[t] for t in tps], marker="o", label=name)
        ax.plot(tps, [by_tp[tps[0]] * t / tps[0] for t in tps], ls=":", color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted({t for v in lines.values() for t in v}))
    ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
    ax.set_xlabel("tensor-parallel degree (TP)")
    ax.set_ylabel("items/s (median)")
    ax.set_title("Topology scaling (dotted: linear)", fontsize=9)
    ax.legend(fontsize=6)
    return _save(fig, path)


# --- history: small multiples -------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Trend:
    """One measurement's series: per point its label (unique), median items/s (None: not
    ok, or missing: a gap) and whisker; change points and suspected steps as (index of the
    first point after, time change, + = slower); the points that failed and those measured
    on a busy machine."""

    name: str
    labels: list[str]
    values: list[float | None]
    whiskers: list[tuple[float, float] | None]
    change_points: list[tuple[int, float]]
    steps: list[tuple[int, float]] = dataclasses.field(default_factory=list)
    failed: list[int] = dataclasses.field(default_factory=list)
    busy: list[int] = dataclasses.field(default_factory=list)


def _runs(values: list[float | None]) -> list[list[int]]:
    """The indices of the unbroken stretches of values (a None breaks the line: a gap)."""
    out: list[list[int]] = []
    for i, v in enumerate(values):
        if v is None:
            continue
        if out and out[-1][-1] == i - 1:
            out[-1].append(i)
        else:
            out.append([i])
    return out


def _trend_marks(ax, t: Trend, top: float) -> None:
    """A panel's failed points (shaded), busy points (ringed), change points (dashed) and
    suspected steps (dotted), each step with its change of time."""
    for i in t.failed:
        ax.axvspan(i - 0.3, i + 0.3, color="#f2dede", lw=0)
        ax.text(i, top * 0.05, "failed", ha="center", fontsize=6, rotation=90)
    for i in t.busy:
        ax.plot([i], [t.values[i]], "o", mfc="none", mec=VERDICT_COLOURS["regressed"], ms=9)
    for marks, style in ((t.change_points, "--"), (t.steps, ":")):
        for index, change in marks:
            col = VERDICT_COLOURS["regressed" if change > 0 else "improved"]
            ax.axvline(index - 0.5, color=col, ls=style, lw=1.2)
            ax.text(index - 0.45, top * 1.2, f"{change:+.0%} time", color=col, fontsize=7,
                    va="top")


def history_chart(title: str, trends: list[Trend], path: Path,
                  columns: int = 2) -> Path | None:
    """One figure of small multiples, a panel per case: median items/s per commit from zero
    (whiskers: slowest to fastest run), each point labelled by its commit, change points as
    dashed lines coloured by direction with the change of time per item."""
    trends = [t for t in trends if any(v is not None for v in t.values)]
    if not trends:
        return None
    plt = _plt()
    from matplotlib.lines import Line2D

    cols = min(columns, len(trends))
    rows = -(-len(trends) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 0.6 + 2.4 * rows), squeeze=False)
    for ax, t in zip(axes.flat, trends, strict=False):
        for xs in _runs(t.values):  # a gap (missing, failed) breaks the line
            ys = [t.values[i] for i in xs]
            err = [[ys[n] - (t.whiskers[i] or (ys[n], ys[n]))[0] for n, i in enumerate(xs)],
                   [(t.whiskers[i] or (ys[n], ys[n]))[1] - ys[n] for n, i in enumerate(xs)]]
            ax.errorbar(xs, ys, yerr=err, fmt="-o", color=PLAIN, ms=4, lw=1.2, capsize=2,
                        ecolor="#999999", elinewidth=0.8)
        top = max((w[1] if w else v) for v, w in zip(t.values, t.whiskers, strict=True)
                  if v is not None)
        ax.set_ylim(0, top * 1.25)
        _trend_marks(ax, t, top)
        step = max(1, -(-len(t.labels) // 16))  # every commit up to 16 points a panel
        ticks = list(range(0, len(t.labels), step))
        ax.set_xticks(ticks, [t.labels[i] for i in ticks], rotation=35, ha="right",
                      fontsize=6.5)
        ax.set_xlim(-0.5, len(t.labels) - 0.5)
        ax.set_title(wrap(t.name, 48), fontsize=8)
        ax.set_ylabel("items/s", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", color="#eeeeee", lw=0.6)
    for ax in list(axes.flat)[len(trends):]:
        ax.set_visible(False)
    marks = [Line2D([], [], color=VERDICT_COLOURS["regressed"], ls="--",
                    label="change point: slower"),
             Line2D([], [], color=VERDICT_COLOURS["improved"], ls="--",
                    label="change point: faster"),
             Line2D([], [], color=PLAIN, ls=":", label="suspected step"),
             Line2D([], [], color=PLAIN, marker="o", label="median (whiskers: runs)"),
             Line2D([], [], ls="", marker="o", mfc="none",
                    mec=VERDICT_COLOURS["regressed"], label="busy machine")]
    fig.suptitle(title, fontsize=10, x=0.01, y=0.995, ha="left", va="top")
    # the legend on a line of its own under the title (five marks do not fit beside it)
    top = 1 - 0.5 / fig.get_figheight()
    fig.legend(handles=marks, loc="upper left", fontsize=7, ncol=5,
               bbox_to_anchor=(0.0, top), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.7 / fig.get_figheight()))
    return _save(fig, path, layout=False)

"""PNG plots for reports (matplotlib, Agg backend, imported lazily). Each function takes plain
data, writes one file and returns its path, or None when there is nothing to draw.

Every plot carries the verdict, not only the numbers: intervals as error bars, colour by
verdict (`VERDICT_COLOURS`, Paul Tol's colour-blind-safe palette), baseline and new side by
side, bars on linear axes from zero unless the values span more than 30x (then a log axis
that says so: marks.py), the number of timed runs (`n=`) beside each value, a side measured
on a busy machine hatched and named, the config and commits in the title, and a width that
GitHub shows without scaling text away (`WIDTH` inches at `DPI`: about 990 pixels). The
history's trend plot is trends.py. A plot elsewhere (the servers wing's) draws with the same
public helpers: `pyplot()`, `save_png(fig, path)`, `wrap`, the colours.
"""

from __future__ import annotations

import dataclasses
import statistics
import textwrap
from pathlib import Path

from .marks import axis_label, log_scale

DPI = 110
WIDTH = 9.0  # inches
BASE_COLOUR = "#bbbbbb"  # the baseline (or a run without a verdict): grey
PLAIN = "#4477aa"
BUSY_HATCH = "////"  # a bar measured while other processes held the CPU past the busy level
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


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display), imported on first use: what
    every plot of mibench draws with (trends.py's, the servers wing's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_png(fig, path: Path, layout: bool = True) -> Path:
    """The figure as a PNG at `path`, written whole or not at all (records/io.py)."""
    import io

    from ..records.io import write_output

    if layout:
        fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=DPI, bbox_inches="tight")  # long case ids inside
    pyplot().close(fig)
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
    if "busy" in classes:
        handles.append(Patch(facecolor="white", edgecolor="#333333", hatch=BUSY_HATCH,
                             label=BUSY_LABEL))
    if handles:
        ax.legend(handles=handles, fontsize=7, **kw)


BUSY_LABEL = "busy machine (not evidence)"


# --- side-by-side bars with whiskers (throughput, time per item) ----------------------------


@dataclasses.dataclass(frozen=True)
class Bars:
    """One artifact's bars: per case its value (None: not ok), whisker (low, high),
    verdict (None: the baseline, or no comparison), timed runs (n) and whether it was
    measured on a busy machine (empty: not known)."""

    name: str
    values: list[float | None]
    whiskers: list[tuple[float, float] | None]
    verdicts: list[str | None]
    baseline: bool = False
    counts: list[int | None] = dataclasses.field(default_factory=list)
    busy: list[bool] = dataclasses.field(default_factory=list)


def _grouped_bars(ax, labels: list[str], sides: list[Bars], fmt: str) -> set[str]:
    """Horizontal bars, one group per case (first case on top), one bar per side, from zero
    (or, on a log axis, from below the smallest whisker); value and `n=` written at the
    whisker's end, a busy side hatched; returns the colour classes used (and `busy`)."""
    n, k = len(labels), len(sides)
    height = 0.8 / k
    classes: set[str] = set()
    ends = [e for s in sides for v, w in zip(s.values, s.whiskers, strict=True)
            if v is not None for e in (v, *(w or ()))]
    log = log_scale(ends)
    floor = min(e for e in ends if e > 0) / 2 if log else 0.0
    for j, side in enumerate(sides):
        for i, (v, w, verdict) in enumerate(zip(side.values, side.whiskers, side.verdicts,
                                                strict=True)):
            if v is None:
                continue
            y = (n - 1 - i) + 0.4 - height * (j + 0.5)
            col = BASE_COLOUR if side.baseline else colour(verdict)
            classes.add("baseline" if side.baseline else verdict_class(verdict) or "plain")
            busy = bool(side.busy) and side.busy[i]
            classes |= {"busy"} if busy else set()
            err = None if w is None else [[max(v - w[0], 0.0)], [max(w[1] - v, 0.0)]]
            ax.barh(y, v - floor, left=floor, height=height * 0.92, color=col, xerr=err,
                    hatch=BUSY_HATCH if busy else None, edgecolor="#333333" if busy else None,
                    lw=0, error_kw=dict(ecolor="#333333", lw=0.8, capsize=2))
            end = max(v, w[1] if w else v)
            count = side.counts[i] if side.counts else None
            tag = (f"{v:{fmt}}" + (f" n={count}" if count else "") + (" busy" if busy else "")
                   + (f"  {side.name}" if k > 2 else ""))
            ax.text(end, y, " " + tag, va="center", fontsize=6.5)
    top = max(ends, default=0.0)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(floor, top * 8)  # room for the value labels, a decade or so
    else:
        ax.set_xlim(0, top * 1.45 if top > 0 else 1)  # room for the value labels, from zero
    ax.set_yticks(range(n), [wrap(lab) for lab in reversed(labels)], fontsize=7.5)
    ax.set_ylim(-0.6, n - 0.4)
    ax.grid(axis="x", color="#eeeeee", lw=0.6)
    ax.set_axisbelow(True)
    return classes | ({"log"} if log else set())


THROUGHPUT = "throughput, items/s (median of n timed runs; whiskers: slowest to fastest)"


def throughput_chart(labels: list[str], sides: list[Bars], path: Path,
                     subject: str = "") -> Path | None:
    """Per case, every artifact's median items/s side by side (a linear axis from zero, or
    a log axis past a 30x span), coloured by its verdict against the baseline (grey) when
    there is one; `subject` (marks.subject: config and commits) heads the title."""
    if not labels or not any(v is not None for s in sides for v in s.values):
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH, 0.9 + row_inches(labels, 0.42) * len(labels)
                                    * max(1, len(sides)) ** 0.6))
    classes = _grouped_bars(ax, labels, sides, ".4g")
    ax.set_xlabel(axis_label("items/s (higher is faster)", "log" in classes))
    ax.set_title(f"{subject}: {THROUGHPUT}" if subject else THROUGHPUT.capitalize(),
                 fontsize=9)
    if classes - {"plain", "log"}:
        _legend(ax, classes, next((s.name for s in sides if s.baseline), ""),
                loc="lower right")
    return save_png(fig, path)


@dataclasses.dataclass(frozen=True)
class Change:
    """One compared artifact's change per case: time new / base - 1 (+ = slower), its
    interval and verdict (None where the case has no change)."""

    name: str
    change: list[float | None]
    low: list[float | None]
    high: list[float | None]
    verdicts: list[str | None]
    busy: list[bool] = dataclasses.field(default_factory=list)  # a side measured busy


def comparison_chart(labels: list[str], times: list[Bars], changes: list[Change],
                     path: Path, threshold: float, level: str = "99%",
                     subject: str = "") -> Path | None:
    """Two panels sharing the cases: left, ms per item of the baseline and each new
    artifact side by side (from zero, or a log axis past a 30x span; whiskers: fastest to
    slowest run; n=, busy hatched); right, the change of time per item with its interval as
    error bars, coloured by verdict (hollow where a side was busy), the threshold shaded;
    `subject` (config and commits) above both."""
    if not labels or not any(c is not None for ch in changes for c in ch.change):
        return None
    plt = pyplot()
    rows = len(labels) * max(1, len(changes)) ** 0.6
    fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 1.2 + row_inches(labels, 0.5) * rows),
                                      sharey=True,
                                      gridspec_kw={"width_ratios": [1, 1.15]})
    classes = _grouped_bars(left, labels, times, ".3g")
    left.set_xlabel(axis_label("ms per item (lower is faster)", "log" in classes))
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
            busy = bool(ch.busy) and ch.busy[i]
            classes |= {"busy"} if busy else set()
            right.errorbar(100 * c, y, xerr=err, fmt="o", color=colour(verdict), ms=5,
                           capsize=3, lw=1.4, mfc="white" if busy else colour(verdict))
            span = max(span, abs(100 * (lo if lo is not None else c)),
                       abs(100 * (hi if hi is not None else c)))
            tag = (f"{100 * c:+.1f}%" + (" busy" if busy else "")
                   + (f" {ch.name}" if k > 1 else ""))
            right.annotate(tag, (100 * c, y), xytext=(0, 6), textcoords="offset points",
                           ha="center", fontsize=6.5)
    right.set_xlim(-span * 1.12, span * 1.12)
    right.set_xlabel(f"time new / base - 1 (%, + = slower; bars: {level} interval)")
    right.set_title(f"Change (shaded: within the {threshold:.0%} threshold)", fontsize=9)
    right.grid(axis="x", color="#eeeeee", lw=0.6)
    right.tick_params(axis="y", left=False)
    _legend(right, classes, times[0].name if times and times[0].baseline else "",
            loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=3)  # covers no point
    if subject:
        fig.suptitle(f"{subject}: time per item and its change", fontsize=10, x=0.01,
                     ha="left")
    return save_png(fig, path)


# --- spread, scaling --------------------------------------------------------------------


def spread_chart(labels: list[str], runs: list[list[float]], path: Path,
                 factor: float = 1.5, busy: list[bool] | None = None,
                 subject: str = "") -> Path | None:
    """Each timed run over its case's median; runs above `factor` are tail pauses (red); a
    case measured on a busy machine drawn hollow and named (`busy`), `n=` per case."""
    busy = busy or [False] * len(labels)
    data = [(f"{lab} (n={len(r)}{', busy' if b else ''})", r, b)
            for lab, r, b in zip(labels, runs, busy, strict=True) if len(r) > 1]
    if not data:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(WIDTH, 0.8 + row_inches([lab for lab, _, _ in data], 0.4)
                                    * len(data)))
    for y, (_, r, b) in enumerate(reversed(data)):
        med = statistics.median(r)
        rel = [t / med for t in r]
        cols = [VERDICT_COLOURS["regressed"] if x > factor else PLAIN for x in rel]
        ax.scatter(rel, [y] * len(rel), s=14, facecolors="none" if b else cols,
                   edgecolors=cols)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.axvline(factor, color=VERDICT_COLOURS["regressed"], lw=0.8, ls="--",
               label=f"tail pause ({factor}x)")
    if any(b for _, _, b in data):
        ax.scatter([], [], s=14, facecolors="none", edgecolors=PLAIN, label=BUSY_LABEL)
    ax.set_yticks(range(len(data)), [wrap(lab) for lab, _, _ in reversed(data)],
                  fontsize=7.5)
    ax.set_xlabel("run time / median")
    ax.set_title(f"{subject}: run-to-run spread" if subject else "Run-to-run spread",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return save_png(fig, path)


def scaling_chart(lines: dict[str, dict[int, float]], path: Path, subject: str = ""
                  ) -> Path | None:
    """Items/s against TP per case, with linear scaling from the smallest TP dotted (a log
    axis always: the line's slope is the scaling)."""
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    plt = pyplot()
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
    ax.set_title((f"{subject}: t" if subject else "T") + "opology scaling (dotted: linear; "
                 "log scales)", fontsize=9)
    ax.legend(fontsize=6)
    return save_png(fig, path)

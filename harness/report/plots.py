"""PNG plots for reports (matplotlib, Agg backend, imported lazily). Each function takes plain
lists, writes one file and returns its path, or None when there is nothing to draw."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

DPI = 110


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, bbox_inches="tight")  # long case ids stay inside
    _plt().close(fig)
    return path


def throughput_chart(labels: list[str], values: list[float], path: Path,
                     title: str = "Throughput (median, items/s)") -> Path | None:
    """Horizontal bars, log scale when the values span more than a factor of 20."""
    pairs = [(lab, v) for lab, v in zip(labels, values, strict=True)
             if v is not None and math.isfinite(v) and v > 0]
    if not pairs:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.32 * len(pairs)))
    bars = ax.barh([p[0] for p in pairs][::-1], [p[1] for p in pairs][::-1], color="#4477aa")
    ax.bar_label(bars, fmt="%.4g", fontsize=7, padding=2)
    if max(p[1] for p in pairs) / min(p[1] for p in pairs) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("items/s")
    ax.set_title(title)
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def spread_chart(labels: list[str], runs: list[list[float]], path: Path,
                 factor: float = 1.5) -> Path | None:
    """Each timed run over its case's median; runs above `factor` are tail pauses (red)."""
    data = [(lab, r) for lab, r in zip(labels, runs, strict=True) if len(r) > 1]
    if not data:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.32 * len(data)))
    for y, (_, r) in enumerate(reversed(data)):
        med = statistics.median(r)
        rel = [t / med for t in r]
        ax.scatter(rel, [y] * len(rel), s=14,
                   c=["#cc3311" if x > factor else "#4477aa" for x in rel])
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.axvline(factor, color="#cc3311", lw=0.8, ls="--", label=f"tail pause ({factor}x)")
    ax.set_yticks(range(len(data)), [lab for lab, _ in reversed(data)], fontsize=7)
    ax.set_xlabel("run time / median")
    ax.set_title("Run-to-run spread")
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def change_chart(labels: list[str], changes: dict[str, list[float | None]], path: Path,
                 threshold: float) -> Path | None:
    """Relative throughput change vs the baseline, one bar group per compared commit."""
    if not changes or not labels:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.32 * len(labels) * max(1, len(changes))))
    height = 0.8 / len(changes)
    for k, (name, vals) in enumerate(changes.items()):
        ys = [len(labels) - 1 - i + k * height for i in range(len(labels))]
        ax.barh(ys, [100 * (v or 0.0) for v in vals], height=height, label=name)
    for x in (-threshold, threshold):
        ax.axvline(100 * x, color="grey", lw=0.8, ls="--")
    ax.set_yticks([len(labels) - 1 - i for i in range(len(labels))], labels, fontsize=7)
    ax.set_xlabel("throughput change vs baseline (%)")
    ax.set_title("Commit comparison")
    ax.legend(fontsize=7)
    return _save(fig, path)


def scaling_chart(lines: dict[str, dict[int, float]], path: Path) -> Path | None:
    """Items/s against TP per case, with linear scaling from the smallest TP dashed."""
    lines = {k: v for k, v in lines.items() if len(v) > 1}
    if not lines:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, by_tp in lines.items():
        tps = sorted(by_tp)
        (line,) = ax.plot(tps, [by_tp[t] for t in tps], marker="o", label=name)
        ax.plot(tps, [by_tp[tps[0]] * t / tps[0] for t in tps], ls=":", color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sorted({t for v in lines.values() for t in v}))
    ax.get_xaxis().set_major_formatter(_ticker().ScalarFormatter())
    ax.set_xlabel("tensor-parallel degree (TP)")
    ax.set_ylabel("items/s (median)")
    ax.set_title("Topology scaling (dotted: linear)")
    ax.legend(fontsize=6)
    return _save(fig, path)


def _ticker():
    import matplotlib.ticker

    return matplotlib.ticker


def trend_chart(name: str, xlabels: list[str], values: list[float | None],
                change_points: list[int], path: Path) -> Path | None:
    """A case's median throughput over commits; dashed lines where a change point starts."""
    if not any(v is not None for v in values):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    xs = list(range(len(values)))
    ax.plot([x for x, v in zip(xs, values, strict=True) if v is not None],
             [v for v in values if v is not None], marker="o", color="#4477aa")
    for i in change_points:
        ax.axvline(i - 0.5, color="#cc3311", ls="--", lw=1)
    ax.set_xticks(xs, xlabels, rotation=60, fontsize=7, ha="right")
    ax.set_ylabel("items/s (median)")
    ax.set_title(name, fontsize=9)
    return _save(fig, path)

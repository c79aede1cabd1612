"""The site's pictures as inline SVG (pure: numbers in, markup out), so a page carries its
own plot: no image to fetch, no script to run, text that stays sharp at any zoom, and a
`<title>` on every mark for its figures. Drawn from the case page's records
(site/model.py); the colours are the reports' verdict colours (report/plots.py).

The trend: items/s of every run of a measurement on an axis from zero, one mark per run
(`.pt`: a filled dot measured on a quiet machine, a hollow red ring on a busy one, a cross
for a failed run), whiskers from the slowest to the fastest timed run, change points
dashed and suspected steps dotted (coloured by verdict, labelled by their change of time;
only those report/marks.py `drawn_steps` keeps: never an undecided one, never one between two
runs of one commit),
culprit, acceptance and fix flags above the plot, environment changes as diamonds on the
axis (a red one where a step coincides), and under the axis a strip of the nights' words.
"""

from __future__ import annotations

import math
from html import escape

from ..plots import PLAIN, VERDICT_COLOURS, colour

W, H = 960, 300  # the trend's whole size
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 46, 70  # room for the axis, flags, labels and strip
BUSY = "#cc3311"
SPARK_W, SPARK_H = 140, 26


def _f(x: float) -> str:
    return f"{x:.1f}"


def _ticks(top: float) -> list[float]:
    """About five round ticks from 0 to `top`."""
    if top <= 0:
        return [0.0]
    raw = top / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top / step) + 1)]


def _label(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def sparkline(values: list[float | None], verdict: str | None) -> str:
    """A small line of a series' items/s (None: a gap), scaled to its own range, its last
    point coloured by the current verdict."""
    known = [v for v in values if v is not None]
    if not known:
        return ""
    lo, hi = min(known), max(known)
    span = (hi - lo) or hi or 1.0
    n = max(len(values) - 1, 1)

    def xy(i, v):
        return _f(1 + i * (SPARK_W - 4) / n), _f(SPARK_H - 2 - (v - lo) / span * (SPARK_H - 4))

    lines, run = [], []
    for i, v in enumerate(values + [None]):
        if v is None:
            if len(run) > 1:
                lines.append(" ".join(f"{x},{y}" for x, y in run))
            run = []
        else:
            run.append(xy(i, v))
    last = next((i, v) for i, v in reversed(list(enumerate(values))) if v is not None)
    cx, cy = xy(*last)
    body = "".join(f'<polyline points="{p}"/>' for p in lines)
    return (f'<svg class="spark" width="{SPARK_W}" height="{SPARK_H}" '
            f'viewBox="0 0 {SPARK_W} {SPARK_H}" role="img" aria-label="trend">'
            f'<title>items/s over {len(values)} runs: {_label(lo)} to {_label(hi)}</title>'
            f'{body}<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour(verdict)}"/></svg>')


def trend(runs: list, steps: list, flags: list, envs: list) -> str:
    """The case page's plot: `runs` (model.RunView), `steps` (model.StepView), `flags`
    (model.Flag: a culprit, acceptance or fix at a run index) and `envs` (model.StepView-like
    environment changes: `index`, `changes`, `hit`)."""
    n = max(len(runs), 1)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM
    top = max([r.hi or r.items_per_s or 0 for r in runs] + [0]) * 1.1 or 1.0

    def x(i: float) -> float:
        return LEFT + (i + 0.5) * pw / n

    def y(v: float) -> float:
        return TOP + ph * (1 - v / top)

    out = [f'<svg class="trend" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
           f'aria-label="items/s of each run">']
    for t in _ticks(top):  # the grid, from zero
        out.append(f'<line class="grid" x1="{LEFT}" x2="{W - RIGHT}" y1="{_f(y(t))}" '
                   f'y2="{_f(y(t))}"/><text class="tick" x="{LEFT - 6}" y="{_f(y(t) + 4)}" '
                   f'text-anchor="end">{_label(t)}</text>')
    out.append(f'<text class="axis" x="14" y="{TOP + ph / 2:.0f}" transform="rotate(-90 14 '
               f'{TOP + ph / 2:.0f})" text-anchor="middle">items/s (median run)</text>')
    out += _line(runs, x, y)
    for s in steps:
        out.append(_step(s, x(s.index - 0.5), TOP, TOP + ph))
    for e in envs:
        out.append(_env(e, x(e.index - 0.5), TOP + ph))
    for k, f in enumerate(flags):
        out.append(_flag(f, x(f.index - 0.5), 12 + 14 * (k % 2)))
    for r in runs:
        out.append(_mark(r, x(r.index), y, TOP + ph))
    out += _strip(runs, x, pw / n, TOP + ph + 22)
    out += _xlabels(runs, x, TOP + ph + 50)
    out.append("</svg>")
    return "".join(out)


def _line(runs: list, x, y) -> list[str]:
    """The median line, broken where a run has no figure (missing, failed)."""
    out, run = [], []
    for r in runs + [None]:
        if r is None or r.items_per_s is None:
            if len(run) > 1:
                out.append(f'<polyline class="line" points="{" ".join(run)}"/>')
            run = []
        else:
            run.append(f"{_f(x(r.index))},{_f(y(r.items_per_s))}")
    return out


def _mark(r, cx: float, y, floor: float) -> str:
    """One run: whiskers and a dot (quiet), a ring (busy) or a cross (no figure)."""
    tip = escape(r.tip)
    link = f'<a href="#run-{r.index}">'
    if r.items_per_s is None:
        d = f"M{_f(cx - 4)},{_f(floor - 8)}l8,8m0,-8l-8,8"
        return (f'{link}<path class="pt failed" data-run="{escape(r.run_id)}" d="{d}">'
                f"<title>{tip}</title></path></a>")
    whisker = (f'<line class="wh" x1="{_f(cx)}" x2="{_f(cx)}" y1="{_f(y(r.lo))}" '
               f'y2="{_f(y(r.hi))}"/>' if r.lo is not None and r.hi is not None else "")
    kind = "busy" if r.busy else "quiet"
    return (f'{whisker}{link}<circle class="pt {kind}" data-run="{escape(r.run_id)}" '
            f'cx="{_f(cx)}" cy="{_f(y(r.items_per_s))}" r="4"><title>{tip}</title></circle></a>')


def _step(s, at: float, top: float, bottom: float) -> str:
    dash = "6 4" if s.kind == "change point" else "2 3"
    c = colour(s.verdict)
    return (f'<g class="step"><line x1="{_f(at)}" x2="{_f(at)}" y1="{_f(top)}" '
            f'y2="{_f(bottom)}" stroke="{c}" stroke-dasharray="{dash}" stroke-width="1.5"/>'
            f'<text x="{_f(at + 4)}" y="{_f(top + 12)}" fill="{c}">{escape(s.short)}</text>'
            f"<title>{escape(s.tip)}</title></g>")


def _env(e, at: float, axis: float) -> str:
    c = BUSY if e.hit else "#777777"
    d = f"M{_f(at)},{_f(axis - 6)}l6,6l-6,6l-6,-6z"
    text = (f'<text x="{_f(at + 8)}" y="{_f(axis - 4)}" fill="{BUSY}">environment changed'
            "</text>" if e.hit else "")
    return (f'<g class="env{" hit" if e.hit else ""}"><path d="{d}" fill="{c}"/>{text}'
            f"<title>{escape('; '.join(e.changes))}</title></g>")


def _flag(f, at: float, ty: float) -> str:
    c = {"culprit": VERDICT_COLOURS["regressed"], "confirmed": VERDICT_COLOURS["regressed"],
         "fixed": VERDICT_COLOURS["improved"]}.get(f.kind, PLAIN)
    return (f'<g class="flag {f.kind}"><line x1="{_f(at)}" x2="{_f(at)}" y1="{_f(ty + 2)}" '
            f'y2="{TOP}" stroke="{c}"/><text x="{_f(at + 3)}" y="{_f(ty)}" fill="{c}">'
            f"{escape(f.text)}</text><title>{escape(f.tip)}</title></g>")


def _strip(runs: list, x, width: float, ty: float) -> list[str]:
    """Each run's night's word for the case, as a coloured cell under the axis."""
    out = [f'<text class="tick" x="{LEFT - 6}" y="{_f(ty + 8)}" text-anchor="end">night</text>']
    w = max(width - 1, 1)
    for r in runs:
        if r.verdict:
            out.append(f'<rect class="nv" x="{_f(x(r.index) - w / 2)}" y="{_f(ty)}" '
                       f'width="{_f(w)}" height="10" fill="{colour(r.verdict)}">'
                       f"<title>{escape(r.short)}: {escape(r.verdict)}</title></rect>")
    return out


def _xlabels(runs: list, x, ty: float) -> list[str]:
    """Commit labels under the strip, at most about 12."""
    every = max(1, math.ceil(len(runs) / 12))
    return [f'<text class="tick" x="{_f(x(r.index))}" y="{_f(ty)}" text-anchor="middle">'
            f"{escape(r.short)}</text>" for r in runs[::every]]

"""Matching reference figures to cases: what a case must be to be set beside a figure, and
why the two are not the same measurement. Pure; shared by the run report
(`report.references`, `report.reference_pairs`) and the compile report's roofline table.

A case is seen as a `Seen`: its engine, mode, options, tp and item count, the machine it ran
or was compiled for, its model, dtype and workload, its items/s (median and best timed
run) or its status. A case matches a figure when engine, mode, tp and every option the
figure states agree (options over the mode's defaults); a ratio also needs the same
hardware (platform, device kind, device count), model shape, dtype and query and item
lengths, and an ok case. Item counts may differ: a ratio then says so.
"""

from __future__ import annotations

import dataclasses

from mibench.engines import MODES

from ..config.keys import model_name, short
from ..records import ReferenceFigure
from ..records.references import RefSide, SpeedupFigure
from ..records.summaries import median
from . import fmt
from .tables import Row


@dataclasses.dataclass(frozen=True)
class Seen:
    """A measured (or compiled) case as reference matching sees it."""

    case_id: str
    engine: str
    mode: str
    params: dict
    tp: int
    items: int | None
    platform: str | None
    kind: str
    chips: int | None
    hardware: str  # as the report names it: `CPU (2 cores)`, `TPU v6 lite x4`
    model: str  # the preset or folder name: `tiny`, `qwen3-0.6b`
    dtype: str
    workload: dict
    status: str
    median: float | None = None  # items/s of the median timed run
    best: float | None = None  # items/s of the fastest timed run
    time_s: float | None = None  # the median run's time for `items` items
    run: str = ""
    row: Row | None = None


def seen_row(row: Row) -> Seen:
    c, d = row.case, row.record.provenance.devices
    ok = c.status == "ok" and c.metrics.throughput_items_per_s is not None
    thr = c.metrics.throughput_items_per_s
    total = c.metrics.total_s
    return Seen(c.case_id, c.engine, c.mode, dict(c.params), c.topology.tp, row.items,
                d.platform, (d.kind or "").lower(), d.count, fmt.hardware(row.record),
                model_name(c.model.path), c.model.dtype, c.workload.as_dict(), c.status,
                median(thr) if ok else None, thr.max if ok else None,
                total.median if ok and total else None, row.run, row)


def seen_rows(rows: list[Row]) -> list[Seen]:
    return [seen_row(r) for r in rows]


def options_of(engine: str, mode: str, params: dict) -> dict:
    declared = MODES.get(engine, {}).get(mode)
    return declared.with_defaults(params) if declared is not None else dict(params)


def how(engine: str, mode: str, options: dict) -> str:
    opts = ", ".join(f"{k}={short(v)}" for k, v in options.items())
    return f"{engine}/{mode}" + (f" ({opts})" if opts else "")


def candidates(fig: ReferenceFigure, cases: list[Seen]) -> list[Seen]:
    """The cases measuring what the figure measured (engine, mode, tp, stated options)."""
    out = []
    for s in cases:
        opts = options_of(s.engine, s.mode, s.params)
        if (s.engine, s.mode, s.tp) == (fig.engine, fig.mode, fig.tp) \
                and all(opts.get(k) == v for k, v in fig.options.items()):
            out.append(s)
    return out


def pick(fig: ReferenceFigure, cases: list[Seen]) -> Seen | None:
    """The candidate at the figure's item count when there is one, else the fastest."""
    found = candidates(fig, cases)
    same_n = [s for s in found if s.items == fig.workload.num_items]
    pool = same_n or found
    return max(pool, key=lambda s: s.median or -1.0, default=None)


def mismatches(fig: ReferenceFigure, s: Seen) -> list[str]:
    """Why `s` is not the figure's measurement (empty: it is); an unmeasured case says so."""
    why = []
    if s.platform != fig.hardware.platform or s.chips != fig.hardware.chips or not any(
            k.lower() in s.kind for k in fig.hardware.kinds):
        why.append(f"hardware {s.hardware}, not {fig.hardware.label}")
    if s.model.lower() not in (fig.model.shape.lower(),
                               fig.model.name.rsplit("/", 1)[-1].lower()):
        why.append(f"model {s.model}, not {fig.model.shape}")
    if s.dtype != fig.dtype:
        why.append(f"dtype {s.dtype}, not {fig.dtype}")
    for key in ("query_tokens", "item_tokens"):
        if s.workload.get(key) != getattr(fig.workload, key):
            why.append(f"{key} {short(s.workload.get(key))}, not "
                       f"{getattr(fig.workload, key)}")
    return why


def side_figure(sp: SpeedupFigure, side: RefSide, figures: dict[str, ReferenceFigure]
                ) -> ReferenceFigure:
    """A speedup's side as a figure: the set's figure it names, or the inline mode on the
    speedup's machine, model and workload."""
    if side.figure is not None:
        return figures[side.figure]
    return ReferenceFigure(id=f"{sp.id}.side", hardware=sp.hardware, tp=sp.tp, model=sp.model,
                           dtype=sp.dtype, workload=sp.workload, engine=side.engine,
                           mode=side.mode, options=side.options, outcome="a speedup's side")

"""Reference figures in a report: the figures as their own table (never mixed with measured
rows), and a second table that pairs each figure with the matching measured case of each
artifact and gives measured / reference items/s, or says why there is no ratio.

A case matches a figure when engine, mode, tp and every option the figure states agree
(options over the mode's defaults); the ratio needs the same hardware (platform, device
kind, device count), model shape, dtype and query and item lengths, and an ok case. Item
counts may differ: the ratio is then of items/s on different N, and says so.
"""

from __future__ import annotations

from mibench.engines import MODES
from mibench.harness.config.matrix import short
from mibench.harness.records import ReferenceFigure, ReferenceSet, RunRecord
from mibench.harness.report import fmt
from mibench.harness.report.fmt import Table
from mibench.harness.report.groups import throughput
from mibench.harness.report.tables import Row


def reference_sets(records: list[RunRecord], given: ReferenceSet | None) -> list[ReferenceSet]:
    """`given` (`report --references`), else the artifacts' own sets, each once."""
    if given is not None:
        return [given]
    sets = {r.references.model_dump_json(): r.references for r in records if r.references}
    return list(sets.values())


def _options(engine: str, mode: str, params: dict) -> dict:
    declared = MODES.get(engine, {}).get(mode)
    return declared.with_defaults(params) if declared is not None else dict(params)


def how(fig: ReferenceFigure) -> str:
    opts = ", ".join(f"{k}={short(v)}" for k, v in fig.options.items())
    return f"{fig.engine}/{fig.mode}" + (f" ({opts})" if opts else "")


def candidates(fig: ReferenceFigure, rows: list[Row]) -> list[Row]:
    """The rows measuring what the figure measured (engine, mode, tp, stated options)."""
    out = []
    for r in rows:
        c = r.case
        opts = _options(c.engine, c.mode, c.params)
        if (c.engine, c.mode, c.topology.tp) == (fig.engine, fig.mode, fig.tp) \
                and all(opts.get(k) == v for k, v in fig.options.items()):
            out.append(r)
    return out


def pick(fig: ReferenceFigure, rows: list[Row]) -> Row | None:
    """The candidate at the figure's item count when there is one, else the fastest."""
    found = candidates(fig, rows)
    same_n = [r for r in found if r.items == fig.workload.num_items]
    pool = same_n or found
    return max(pool, key=lambda r: throughput(r) or -1.0, default=None)


def mismatches(fig: ReferenceFigure, row: Row) -> list[str]:
    """Why `row` cannot be set against `fig` (empty: it can)."""
    c, d = row.case, row.record.provenance.devices
    why = []
    kind = (d.kind or "").lower()
    if d.platform != fig.hardware.platform or d.count != fig.hardware.chips or not any(
            k.lower() in kind for k in fig.hardware.kinds):
        why.append(f"hardware {fmt.hardware(row.record)}, not {fig.hardware.label}")
    model = fmt.model_label(c).lower()
    if model not in (fig.model.shape.lower(), fig.model.name.rsplit("/", 1)[-1].lower()):
        why.append(f"model {fmt.model_label(c)}, not {fig.model.shape}")
    if c.model.dtype != fig.dtype:
        why.append(f"dtype {c.model.dtype}, not {fig.dtype}")
    w = c.workload.as_dict()  # an item range as the artifact writes it
    for key in ("query_tokens", "item_tokens"):
        if w.get(key) != getattr(fig.workload, key):
            why.append(f"{key} {short(w.get(key))}, not {getattr(fig.workload, key)}")
    if throughput(row) is None:
        why.append(f"case {c.status}")
    return why


def figures_table(sets: list[ReferenceSet]) -> Table | None:
    """The reference figures themselves: published, not measured by this run."""
    body = []
    for s in sets:
        for f in s.figures:
            w = f.workload
            body.append([f.id, how(f), f.hardware.label, str(f.tp), f.model.name, f.dtype,
                         f"{w.query_tokens} / {w.num_items} x {w.item_tokens}",
                         fmt.num(f.items_per_s), str(f.timed_runs or "-"),
                         ", ".join(f.unstated) or "-", f.source + (f"; {f.note}" if f.note
                                                                   else "")])
    if not body:
        return None
    header = ["Reference", "Mode", "Hardware", "TP", "Model", "Dtype",
              "Query / items x len", "Items/s", "Timed runs", "Not stated by the source",
              "Source"]
    return Table(header, body, ["l"] * 7 + ["r", "r", "l", "l"],
                 title="Reference figures (published, not measured here)",
                 note="Not stated by the source: values this file fills in; a ratio "
                      "against the figure leans on them.")


def ratio_table(sets: list[ReferenceSet], rows: list[Row]) -> Table | None:
    """Per figure and artifact: the matching case, its items/s, and measured / reference."""
    runs = sorted({r.run for r in rows})
    body = []
    for s in sets:
        for f in s.figures:
            for run in runs:
                row = pick(f, [r for r in rows if r.run == run])
                body.append(([run] if len(runs) > 1 else []) + _cells(f, row))
    if not body:
        return None
    header = (["Run"] if len(runs) > 1 else []) + [
        "Reference", "Ref items/s", "Measured case", "Items", "Measured items/s",
        "Measured / reference", "Why no ratio"]
    return Table(header, body, ["l"] * (len(header) - 6) + ["r", "l", "r", "r", "r", "l"],
                 title="Measured against the reference figures",
                 note="Measured / reference > 1: faster than the reference. A ratio marked "
                      "(N a / b) is of items/s on a items measured and b in the reference; "
                      "one marked 'leans on' rests on values the source does not state.")


def _cells(fig: ReferenceFigure, row: Row | None) -> list[str]:
    ref = fmt.num(fig.items_per_s)
    if row is None:
        return [fig.id, ref, "-", "-", "-", "-",
                f"no case {how(fig)} at tp={fig.tp} in this run"]
    why = mismatches(fig, row)
    thr = throughput(row)
    measured = [fig.id, ref, row.case.case_id, str(row.items), fmt.num(thr)]
    if why:
        return measured + ["-", "; ".join(why)]
    ratio = fmt.times(thr / fig.items_per_s)
    if row.items != fig.workload.num_items:
        ratio += f" (N {row.items} / {fig.workload.num_items})"
    if fig.unstated:
        ratio += f", leans on {', '.join(fig.unstated)}"
    return measured + [ratio, ""]

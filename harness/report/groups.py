"""Report tables that compare rows with each other: speedups between modes, A/B tables for
options differing in one key, topology scaling, the model matrix and commit comparison."""

from __future__ import annotations

import json
from collections import defaultdict

from mibench.engines import MODES

from ..config.keys import short
from ..judge.busy import busy
from ..judge.comparable import label
from ..judge.compare import Comparison
from ..records import RunRecord
from ..records.summaries import median
from . import fmt
from .fmt import Table
from .tables import Row


def throughput(row: Row) -> float | None:
    """Median items/s of an ok case, else None."""
    if row.case.status != "ok":
        return None
    return median(row.case.metrics.throughput_items_per_s)


def _ctx(row: Row, tp: bool = True, items: bool = True) -> tuple:
    """Model, dtype, tp and workload of a row: what makes two rows like with like (`items`
    False: the workload but its item count, for ratios of items/s across N)."""
    c = row.case
    workload = c.workload.as_dict()
    if not items:
        workload.pop("num_items", None)
    return (c.model.path, c.model.dtype, c.topology.tp if tp else None,
            json.dumps(workload, sort_keys=True))


def _where(row: Row, runs: bool, tp: bool = True, items: bool = True) -> str:
    c = row.case
    parts = [f"commit {row.run}"] if runs else []
    parts += [fmt.model_label(c), c.model.dtype]
    parts += [f"tp={c.topology.tp}"] if tp else []
    return ", ".join(p for p in parts + ([f"{row.items} items"] if items else []) if p)


def _main_items(by_mode: dict[str, dict[int, Row]]) -> int | None:
    """The item count most engine/modes were measured at (ties: the largest)."""
    counts: dict[int, int] = defaultdict(int)
    for by_n in by_mode.values():
        for n in by_n:
            counts[n] += 1
    return max(counts, key=lambda n: (counts[n], n)) if counts else None


def speed_pick(rows: list[Row]) -> dict[tuple, dict[str, Row]]:
    """Per context (artifact, model, dtype, tp, workload but N): the fastest ok case of
    each engine/mode, at the item count most modes share when the mode has it, else at its
    own (so a `single` timed on fewer items still has a ratio, stated as across N)."""
    found: dict[tuple, dict[str, dict[int, Row]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        thr = throughput(r)
        by_n = found[(r.run,) + _ctx(r, items=False)][f"{r.case.engine}/{r.case.mode}"]
        best = by_n.get(r.items)
        if thr is not None and (best is None or thr > throughput(best)):
            by_n[r.items] = r
    out = {}
    for key, by_mode in found.items():
        main = _main_items(by_mode)
        out[key] = {mode: by_n[main] if main in by_n else max(by_n.values(), key=throughput)
                    for mode, by_n in by_mode.items() if by_n}
    return out


def ratio_cell(row: Row, other: Row) -> str:
    """Items/s of `row` over `other`'s; `(N a / b)` when they were measured on different
    item counts (a ratio of per-item throughput, not a same-workload speedup)."""
    cell = fmt.times(throughput(row) / throughput(other))
    return cell if row.items == other.items else f"{cell} (N {row.items} / {other.items})"


ACROSS_N = ("A cell marked (N a / b) is a ratio of items/s measured on different item "
            "counts: a items for the row, b for the column; it compares per-item throughput, "
            "not the same workload (a packed mode's items/s grows with N).")


def speedups(rows: list[Row]) -> list[Table]:
    """Per context (artifact, model, dtype, tp, workload but N): the fastest case of each
    engine/mode, slowest first, and each one's speedup over every slower mode (the upper
    half would only repeat them as reciprocals); ratios across item counts say so."""
    runs = len({r.run for r in rows}) > 1
    out = []
    for best in speed_pick(rows).values():
        if len(best) < 2:
            continue
        order = sorted(best, key=lambda k: throughput(best[k]))
        across = len({best[k].items for k in order}) > 1
        body = [[fmt.mode_label(best[a].case)] + ([str(best[a].items)] if across else [])
                + [fmt.num(throughput(best[a]))]
                + [ratio_cell(best[a], best[b]) if j < i else ""
                   for j, b in enumerate(order[:-1])]
                for i, a in enumerate(order) if i > 0]  # the slowest: only a column
        header = (["Mode (fastest options)"] + (["Items"] if across else []) + ["Items/s"]
                  + [f"vs {b}" + (f" (N={best[b].items})" if across else "")
                     for b in order[:-1]])
        first = next(iter(best.values()))
        out.append(Table(header, body, ["l"] + ["r"] * (len(header) - 1),
                         title=_where(first, runs, items=not across),
                         note=ACROSS_N if across else None))
    return out


def ab_tables(rows: list[Row]) -> list[Table]:
    """Cases of one artifact that differ in exactly one option (mask, chunk_size, ...)."""
    keys = sorted({k for r in rows for k in r.case.params})
    runs = len({r.run for r in rows}) > 1
    out = []
    for key in keys:
        groups: dict[tuple, list[Row]] = defaultdict(list)
        for r in rows:
            if key in r.case.params:
                rest = json.dumps({k: v for k, v in r.case.params.items() if k != key},
                                  sort_keys=True)
                groups[(r.run, r.case.engine, r.case.mode, rest) + _ctx(r)].append(r)
        for members in groups.values():
            if len({json.dumps(m.case.params[key]) for m in members}) > 1:
                out.append(_ab_table(key, members, runs))
    return out


def _ab_table(key: str, members: list[Row], runs: bool) -> Table:
    first = members[0]
    base = next((throughput(m) for m in members if throughput(m) is not None), None)
    body = []
    for m in members:
        thr, metrics = throughput(m), m.case.metrics
        body.append([short(m.case.params[key]), fmt.num(thr),
                     fmt.num(median(metrics.latency_per_item_ms)),
                     fmt.times(thr / base) if thr is not None and base else "-",
                     fmt.status(m.case)])
    values = " vs ".join(short(m.case.params[key]) for m in members)
    title = f"{key}: {values} ({first.case.engine}/{first.case.mode}, {_where(first, runs)})"
    return Table([key, "Items/s", "Latency/item (ms)",
                  f"Speedup vs {short(first.case.params[key])}", "Status"], body,
                 ["l", "r", "r", "r", "l"], title=title)


def topology_lines(rows: list[Row]) -> dict[str, dict[int, float]]:
    """For the scaling plot: case label -> tp -> items/s (ok cases seen at several tp), the
    label naming the tp measured on a busy machine (`busy machine at tp=4`)."""
    lines: dict[str, dict[int, float]] = defaultdict(dict)
    busy_at: dict[str, list[int]] = defaultdict(list)
    for r in rows:
        if throughput(r) is not None:
            name = f"{label(r.record)} {fmt.mode_label(r.case)} {fmt.model_label(r.case)}"
            if r.case.topology.tp not in lines[name] and busy(r.case.load):
                busy_at[name].append(r.case.topology.tp)
            lines[name].setdefault(r.case.topology.tp, throughput(r))
    return {k + (f" (busy machine at tp={', '.join(map(str, busy_at[k]))})"
                 if busy_at[k] else ""): v for k, v in lines.items() if len(v) > 1}


def topology(rows: list[Row]) -> Table | None:
    """The same case at several tp (across artifacts of one commit): items/s side by side and
    scaling efficiency = (items/s at tp N / items/s at the smallest tp) / (N / smallest tp)."""
    groups: dict[tuple, dict[int, Row]] = defaultdict(dict)
    for r in rows:
        key = (label(r.record), fmt.mode_label(r.case)) + _ctx(r, tp=False)
        groups[key].setdefault(r.case.topology.tp, r)
    groups = {k: v for k, v in groups.items() if len(v) > 1}
    if not groups:
        return None
    tps = sorted({tp for g in groups.values() for tp in g})
    runs = len({k[0] for k in groups}) > 1
    body = []
    for key, by_tp in groups.items():
        low = min(by_tp)
        base = throughput(by_tp[low])
        cells = [(_status_or(by_tp[tp]) if tp in by_tp else "") for tp in tps]
        eff = [f"{(throughput(by_tp[tp]) / base) / (tp / low):.2f}"
               if tp in by_tp and tp != low and base and throughput(by_tp[tp]) else "-"
               for tp in tps[1:]]
        body.append(([key[0]] if runs else []) + [key[1], fmt.model_label(
            next(iter(by_tp.values())).case)] + cells + eff)
    header = (["Commit"] if runs else []) + ["Case", "Model"] + [f"TP={t} items/s" for t in tps]
    header += [f"Efficiency TP={t}" for t in tps[1:]]
    align = ["l"] * (3 if runs else 2) + ["r"] * (2 * len(tps) - 1)
    return Table(header, body, align, note="Efficiency: speedup over the smallest TP of the "
                 "row divided by the ratio of device counts (1.00 = linear scaling).")


def _status_or(row: Row) -> str:
    """Items/s, or the status alone (a side-by-side cell has no room for the reason)."""
    thr = throughput(row)
    if thr is not None:
        return fmt.num(thr)
    return row.case.status if row.case.status == "skipped" else fmt.status(row.case).split(" `")[0]


def has_model_matrix(rows: list[Row]) -> bool:
    return len({fmt.model_label(r.case) for r in rows}) > 1 or len({r.items for r in rows}) > 1


def model_matrix(rows: list[Row]) -> Table | None:
    """Rows: model x mode; columns: item counts; cells: items/s (speedup vs single at the
    same N, or, without one, vs the fastest single of the model at another N, said so)."""
    if not has_model_matrix(rows):
        return None
    counts = sorted({r.items for r in rows if r.items is not None})
    single: dict[tuple, dict[int, Row]] = defaultdict(dict)
    table: dict[tuple, dict[int, Row]] = defaultdict(dict)
    for r in rows:
        model = fmt.model_label(r.case)
        key = (r.run, model, fmt.mode_label(r.case), r.case.topology.tp)
        table[key][r.items] = r
        if (r.case.engine, r.case.mode) in BASELINES and throughput(r):
            single[(r.case.engine, r.case.mode, r.run, model, key[3])
                   + _ctx(r, tp=False, items=False)][r.items] = r
    runs = len({r.run for r in rows}) > 1
    body = []
    for (run, model, mode, tp), by_n in table.items():
        cells = []
        for n in counts:
            row = by_n.get(n)
            if row is None:
                cells.append("")
            elif throughput(row) is None:
                cells.append(_status_or(row))
            else:
                base = speedup_baseline(row.case) or ()
                cells.append(fmt.num(throughput(row)) + _vs_single(row, single.get(
                    (*base, run, model, tp) + _ctx(row, tp=False, items=False), {})))
        body.append(([run] if runs else []) + [model, mode, str(tp)] + cells)
    header = (["Commit"] if runs else []) + ["Model", "Mode", "TP"] + [f"N={n}" for n in counts]
    return Table(header, body, ["l"] * (4 if runs else 3) + ["r"] * len(counts),
                 note="Items/s at N items; in brackets the speedup over jax/single at the "
                      "same model and N, or `vs N=b` when jax/single was measured only at "
                      "other item counts: then a ratio of per-item throughput on different N "
                      "(single's fastest, at b items).")


def speedup_baseline(case) -> tuple[str, str] | None:
    """The (engine, mode) a case's speedup is stated against (`Mode.speedup_baseline`,
    engines/modes/registry.py); None for a baseline itself or a mode the registry lacks."""
    mode = MODES.get(case.engine, {}).get(case.mode)
    return mode.speedup_baseline if mode is not None else None


# the (engine, mode)s some mode's speedup is stated against: jax/single
BASELINES = {m.speedup_baseline for modes in MODES.values() for m in modes.values()
             if m.speedup_baseline is not None}


def _vs_single(row: Row, singles: dict[int, Row]) -> str:
    """` (3.98x)` against its baseline (single) at the row's N, ` (5.05x vs N=64)` against
    the baseline's fastest elsewhere, `` for a baseline itself or when there is none."""
    if speedup_baseline(row.case) is None or not singles:
        return ""
    ref = singles.get(row.items) or max(singles.values(), key=throughput)
    ratio = fmt.times(throughput(row) / throughput(ref))
    return f" ({ratio})" if ref.items == row.items else f" ({ratio} vs N={ref.items})"


def parity_by_model(records: list[RunRecord]) -> Table | None:
    """Largest absolute difference per check kind and model (the seeds' model matrix)."""
    kinds = ["isolation (same_length)", "isolation (changed_length)", "modes", "engines",
             "topologies"]
    worst: dict[str, dict[str, float]] = defaultdict(dict)
    for rec in records:
        models = {c.case_id: fmt.model_label(c) for c in rec.cases}
        for chk in rec.parity.checks if rec.parity else []:
            kind = chk.check + (f" ({chk.variant})" if chk.variant else "")
            model = models.get(chk.case_id)
            if model and chk.max_abs_diff is not None and kind in kinds:
                worst[model][kind] = max(worst[model].get(kind, 0.0), chk.max_abs_diff)
    if len(worst) < 2:
        return None
    used = [k for k in kinds if any(k in w for w in worst.values())]
    body = [[m] + [fmt.sci(w.get(k)) for k in used] for m, w in worst.items()]
    return Table(["Model"] + [f"{k} max" for k in used], body, ["l"] + ["r"] * len(used))


def commit_table(comparisons: list[Comparison]) -> Table | None:
    """One column group per compared artifact: ms/item, the change of time per item with
    its interval (+ = slower), the evidence and the verdict vs the baseline (the first
    column); figures from the raw timed runs, columns and change from one statistic."""
    if not comparisons:
        return None
    base = comparisons[0].base
    order: list[str] = []
    for comp in comparisons:
        order += [c.case_id for c in comp.cases if c.case_id not in order]
    by = [{c.case_id: c for c in comp.cases} for comp in comparisons]
    body = []
    for case_id in order:
        first = next(b[case_id] for b in by if case_id in b)
        cells = [case_id, fmt.num(first.base_ms_per_item, 3)]
        for b in by:
            c = b.get(case_id)
            verdict = "-" if c is None else (f"**{c.verdict}**" if c.regression else c.verdict)
            cells += ["-", "-", "-", verdict] if c is None else [
                fmt.num(c.new_ms_per_item, 3), fmt.interval(c).removeprefix("time "),
                fmt.significance(c.test) + (f"; {c.reason}" if c in comp.busy else "")
                if c.test else c.reason, verdict]
        body.append(cells)
    header = ["Case", f"{base} (baseline) ms/item"]
    for comp in comparisons:
        header += [f"{comp.new} ms/item", "Time change [interval]", "Evidence", "Verdict"]
    return Table(header, body, ["l", "r"] + ["r", "r", "l", "l"] * len(comparisons),
                 note=fmt.CONVENTION).lift_constant(["Evidence"])

"""Reference figures in a report: the figures as their own table (never mixed with measured
rows), and a second table that pairs each figure with the matching measured case of each
artifact and gives measured / reference items/s, or says why there is no ratio
(`ref_match` decides what matches and what differs).

How a measurement is set beside a figure follows the figure's statistic as its seed states
it: a peak (`read_as: best`) beside mibench's best timed run, since a peak may be the best
over several runs or sessions; an unstated statistic beside both mibench's median and its
best. Every figure is its seed's engine (an sglang-jax branch through its own benchmark
script, SGLang's PyTorch stack), and mibench's `jax` is another engine: the tables say so.
"""

from __future__ import annotations

from ..records import ReferenceFigure, ReferenceSet
from . import fmt
from .fmt import Table
from .ref_match import Seen, how, mismatches, pick, seen_rows
from .tables import Row

ENGINES_NOTE = ("Each figure is its seed's engine (the Engine column: sglang-jax branches "
                "through the seeds' benchmark script, SGLang's PyTorch serving stack); the "
                "measured case is mibench's own engine, another engine: a ratio compares "
                "engines as well as machines.")


def reference_sets(records: list, given: ReferenceSet | None) -> list[ReferenceSet]:
    """`given` (`report --references`), else the artifacts' own sets, each once."""
    if given is not None:
        return [given]
    sets = {r.references.model_dump_json(): r.references for r in records
            if getattr(r, "references", None)}
    return list(sets.values())


def statistic(fig) -> str:
    """`"Peak Throughput" -> best run`, or `not named -> median and best`."""
    st = fig.statistic
    if st is None:
        return "not recorded -> median and best"
    said = f'"{st.said}"' if st.said else "not named"
    return f"{said} -> " + {"best": "best run", "unstated": "median and best",
                            "max": "max"}[st.read_as]


def figure_value(fig: ReferenceFigure) -> str:
    if fig.items_per_s is None:
        return "-"
    return ("~" if fig.approximate else "") + fmt.num(fig.items_per_s)


def time_for_n(fig: ReferenceFigure) -> str:
    """The seed's stated time for its N items, else N / items/s (said so)."""
    if fig.time_s is not None:
        return fmt.num(fig.time_s)
    if fig.items_per_s is None:
        return "-"
    return f"{fmt.num(fig.workload.num_items / fig.items_per_s)} (N / items/s)"


def figures_table(sets: list[ReferenceSet]) -> Table | None:
    """The reference figures themselves: published, not measured by this run."""
    body = []
    for s in sets:
        for f in s.figures:
            w = f.workload
            body.append([f.id, f.where, f.source_engine or f.engine, how(f.engine, f.mode,
                                                                          f.options),
                         f.hardware.label, str(f.tp), f.model.name, f.dtype,
                         f"{w.query_tokens} / {w.num_items} x {w.item_tokens}",
                         figure_value(f), time_for_n(f), statistic(f),
                         str(f.timed_runs or "-"), ", ".join(f.unstated) or "-",
                         "; ".join(x for x in (f.outcome, f.note) if x) or "-"])
    if not body:
        return None
    header = ["Reference", "Seed, section", "Engine (the seed's words)", "Matched to",
              "Hardware", "TP", "Model", "Dtype", "Query / items x len", "Items/s",
              "Time for N items (s)", "Statistic (the seed's words -> read as)",
              "Timed runs", "Not stated by the seed", "Outcome, note"]
    return Table(header, body, ["l"] * 9 + ["r", "r", "l", "r", "l", "l"],
                 title="Reference figures (published, not measured here)",
                 note="Not stated by the seed: values this file fills in; a ratio against the "
                      "figure leans on them. Time for N items: the seed's own when it states "
                      "one. Statistic: a peak is set beside mibench's best timed run (a peak "
                      "may be the best of several runs or sessions); a statistic the seed "
                      "does not name, beside mibench's median and best. " + ENGINES_NOTE)


def ratio_table(sets: list[ReferenceSet], rows: list[Row]) -> Table | None:
    """Per figure and artifact: the matching case, its items/s (median, best), its time for
    its N items, and measured / reference as the figure's statistic reads, or why not."""
    seen = seen_rows(rows)
    runs = sorted({s.run for s in seen})
    body = []
    for s in sets:
        for f in s.figures:
            for run in runs:
                found = pick(f, [c for c in seen if c.run == run])
                body.append(([run] if len(runs) > 1 else []) + _cells(f, found))
    if not body:
        return None
    header = (["Run"] if len(runs) > 1 else []) + [
        "Reference", "Ref items/s", "Read as", "Measured case (mibench's engine)", "Items",
        "Median items/s", "Best items/s", "Time for N items (s)", "Measured / reference",
        "Why no ratio"]
    return Table(header, body, ["l"] * (len(header) - 9) + ["r", "l", "l", "r", "r", "r",
                                                             "r", "r", "l"],
                 title="Measured against the reference figures",
                 note="Measured / reference > 1: faster than the reference; against a peak the "
                      "best timed run, against an unstated statistic the median and the best. "
                      "Time for N items: the median run's, N being the case's Items. A ratio "
                      "marked (N a / b) is of items/s on a items measured and b in the "
                      "reference; one marked 'leans on' rests on values the seed does not "
                      "state. " + ENGINES_NOTE)


def read_as(fig) -> str:
    return fig.statistic.read_as if fig.statistic else "unstated"


def ratio_text(fig: ReferenceFigure, found: Seen) -> str:
    """`1.23x best` or `1.10x median, 1.23x best`, with N and what it leans on."""
    ref = fig.items_per_s
    parts = [f"{fmt.times(found.best / ref)} best"] if read_as(fig) == "best" else [
        f"{fmt.times(found.median / ref)} median", f"{fmt.times(found.best / ref)} best"]
    text = ", ".join(parts)
    if found.items != fig.workload.num_items:
        text += f" (N {found.items} / {fig.workload.num_items})"
    if fig.approximate:
        text += ", against ~" + fmt.num(ref)
    if fig.unstated:
        text += f", leans on {', '.join(fig.unstated)}"
    return text


def _cells(fig: ReferenceFigure, found: Seen | None) -> list[str]:
    ref = figure_value(fig)
    stat = {"best": "best run", "unstated": "median, best", "max": "max"}[read_as(fig)]
    if found is None:
        return [fig.id, ref, stat, "-", "-", "-", "-", "-", "-",
                f"no case {how(fig.engine, fig.mode, fig.options)} at tp={fig.tp} in this run"]
    measured = [fig.id, ref, stat, found.case_id, str(found.items or "-"),
                fmt.num(found.median), fmt.num(found.best), fmt.num(found.time_s, 3)]
    why = mismatches(fig, found)
    if found.median is None:
        why.append(f"case {found.status}" + (f" ({fmt.status(found.row.case)})"
                                             if found.row and found.status != "ok" else ""))
    if fig.items_per_s is None:
        why.append(f"the seed gives no figure: {fig.outcome}")
    if why:
        return measured + ["-", "; ".join(why)]
    return measured + [ratio_text(fig, found), ""]


"""The seeds' own speedups and parity maxima beside mibench's, in a run report.

A seed's speedup is a ratio of two of its runs, with the options it names (seed 000's are
all dense-mask: prefill+extend vs packed, 10.08x). mibench's ratio beside it is of the
cases that match each side (`ref_match`: engine, mode, tp, the stated options), from one
artifact when it holds both, read by the seed's statistic (a peak: best runs; unstated:
medians and bests). It is mibench's own ratio on its own machine; the last column names
what makes it another measurement than the seed's (hardware, model, dtype, lengths).

A seed's parity maximum is set beside the largest difference mibench's check of the same
kind measured on that model, never judged against it: the seeds do not say whether their
differences are of probabilities or of log scores, and parity runs its own workload.
"""

from __future__ import annotations

from ..config.matrix import model_name
from ..records import ReferenceSet, RunRecord
from ..records.references import ParityFigure, SpeedupFigure
from . import fmt
from .fmt import Table
from .ref_match import Seen, how, mismatches, pick, seen_rows, side_figure
from .references import ENGINES_NOTE, read_as, statistic
from .tables import Row


def _side(fig, seen: list[Seen], run: str) -> Seen | None:
    """The side's case in `run`, else in any artifact of the report."""
    return pick(fig, [s for s in seen if s.run == run]) or pick(fig, seen)


def mibench_ratio(sp: SpeedupFigure, a: Seen, b: Seen) -> str:
    """mibench's `a` over `b` as the seed's statistic reads: best runs for a peak, else
    medians and bests; `(N x / y)` when the two sides ran different item counts."""
    if a.median is None or b.median is None:
        return "-"
    best = f"{fmt.times(a.best / b.best)} best"
    text = best if read_as(sp) == "best" else f"{fmt.times(a.median / b.median)} median, {best}"
    return text + (f" (N {a.items} / {b.items})" if a.items != b.items else "")


def _speedup_cells(sp: SpeedupFigure, figures: dict, seen: list[Seen], run: str) -> list[str]:
    of, over = side_figure(sp, sp.of, figures), side_figure(sp, sp.over, figures)
    a, b = _side(of, seen, run), _side(over, seen, run)
    sides = (f"{how(of.engine, of.mode, of.options)} over "
             f"{how(over.engine, over.mode, over.options)}")
    head = [sp.id, sp.where, fmt.times(sp.ratio), sides, statistic(sp)]
    missing = [f"no case {how(f.engine, f.mode, f.options)} at tp={f.tp}"
               for f, s in ((of, a), (over, b)) if s is None]
    if missing:
        return head + ["-", "-", "; ".join(missing)]
    why = list(dict.fromkeys(mismatches(of, a) + mismatches(over, b)))
    why += [f"{s.case_id} {s.status}" for s in (a, b) if s.median is None]
    cases = a.case_id + " over " + b.case_id + (f" ({a.run} / {b.run})" if a.run != b.run
                                                else "")
    return head + [cases, mibench_ratio(sp, a, b),
                   "; ".join(why) or "the seed's measurement (machine, model, lengths)"]


def speedup_table(sets: list[ReferenceSet], rows: list[Row]) -> Table | None:
    """Each speedup a seed states beside mibench's ratio of the cases matching its sides."""
    seen = seen_rows(rows)
    runs = sorted({s.run for s in seen}) or [""]
    body = []
    for s in sets:
        figures = {f.id: f for f in s.figures}
        for sp in s.speedups:
            for run in runs:
                body.append(([run] if len(runs) > 1 else [])
                            + _speedup_cells(sp, figures, seen, run))
    if not body:
        return None
    header = (["Run"] if len(runs) > 1 else []) + [
        "Seed speedup", "Seed, section", "Seed's ratio", "Of / over (the options the seed "
        "names)", "Statistic (the seed's words -> read as)", "mibench's cases",
        "mibench's ratio", "Not the seed's measurement because"]
    return Table(header, body, ["l"] * (len(runs) > 1) + ["l", "l", "r", "l", "l", "l", "r", "l"],
                 title="The seeds' speedups beside mibench's",
                 note="The seed's ratio is between two of its own runs, with the options it "
                      "names (seed 000's are all dense-mask); mibench's is between its cases "
                      "that match each side, from one artifact when it holds both. A stated "
                      "change of -1.02% is the ratio 0.99x. " + ENGINES_NOTE)


def _checks(records: list[RunRecord], labels: list[str], p: ParityFigure) -> list[tuple]:
    """(artifact label, record, check, model) of mibench's checks of p's kind: those on p's
    model when there are any, else on every model."""
    out = []
    for rec, lab in zip(records, labels, strict=True):
        models = {c.case_id: model_name(c.model.path) for c in rec.cases}
        for chk in rec.parity.checks if rec.parity else []:
            if chk.check == p.check and (p.check != "isolation" or chk.variant == p.variant):
                out.append((lab, rec, chk, models.get(chk.case_id, "?")))
    same = [c for c in out if c[3].lower() == p.model.shape.lower()]
    return same or out


def _parity_cells(p: ParityFigure, records: list[RunRecord], labels: list[str]) -> list[str]:
    head = [p.id, p.where, p.model.name, p.measures, f"{p.max_diff:g}"]
    if p.variant == "multi":
        return head + ["-", "-", "-", "mibench's engines check scores single against the "
                       "reference's single; no multi-item mode is checked against torch"]
    found = _checks(records, labels, p)
    if not found:
        return head + ["-", "-", "-", f"no {p.check} check in this report"]
    abs_ = max((c.max_abs_diff for *_, c, _ in found if c.max_abs_diff is not None),
               default=None)
    log = max((c.max_log_diff for *_, c, _ in found if c.max_log_diff is not None),
              default=None)
    rec = found[0][1]
    d = rec.provenance.devices
    models = sorted({m for *_, m in found})
    why = [] if models == [p.model.shape] else [f"model {', '.join(models)}, not "
                                                f"{p.model.shape}"]
    if d.platform != p.hardware.platform or d.count != p.hardware.chips:
        why.append(f"hardware {fmt.hardware(rec)}, not {p.hardware.label}")
    dtypes = {c.model.dtype for c in rec.cases}
    if p.dtype not in dtypes:
        why.append(f"dtype {', '.join(sorted(dtypes))}, not {p.dtype}")
    w = rec.parity.workload if rec.parity else {}
    why.append(f"mibench's parity workload (query {w.get('query_tokens')}, "
               f"{w.get('num_items')} items); the seed does not say whether its differences "
               "are of probabilities or log scores")
    return head + [", ".join(dict.fromkeys(lab for lab, *_ in found)), fmt.sci(abs_),
                   fmt.sci(log), "; ".join(why)]


def parity_table(sets: list[ReferenceSet], records: list[RunRecord],
                 labels: list[str]) -> Table | None:
    """Each parity maximum a seed states beside mibench's largest of the same check kind
    on the same model (side by side, not judged)."""
    body = [_parity_cells(p, records, labels) for s in sets for p in s.parity]
    if not body:
        return None
    header = ["Seed maximum", "Seed, section", "Model", "The seed's column",
              "Seed's max", "mibench run", "mibench max abs diff", "mibench max abs ln diff",
              "Not the same measurement because"]
    return Table(header, body, ["l"] * 4 + ["r", "l", "r", "r", "l"],
                 title="The seeds' parity maxima beside mibench's",
                 note="Side by side, never judged against each other: mibench judges its "
                      "checks on log scores against its own tolerances (Parity section).")

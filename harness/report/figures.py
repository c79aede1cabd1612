"""The data behind each plot of a report, gathered from its artifacts and comparisons (no
statistics here: every centre, interval and verdict arrives computed by harness.stats;
plots.py draws)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..judge.busy import BUSY_LEVEL, busy
from ..judge.comparable import label
from ..judge.compare import Comparison
from ..records import CaseRecord, RunRecord
from ..records.summaries import items_of
from . import plots
from .marks import subject
from .plots import Bars, Change


@dataclasses.dataclass(frozen=True)
class Pair:
    """One comparison of a report and the two artifacts it compared."""

    base: RunRecord
    new: RunRecord
    comp: Comparison


def case_ids(records: list[RunRecord]) -> list[str]:
    """Every case id of the artifacts, in order of first appearance."""
    out: dict[str, None] = {}
    for r in records:
        out.update((c.case_id, None) for c in r.cases)
    return list(out)


def _ok(record: RunRecord, case_id: str) -> CaseRecord | None:
    c = next((c for c in record.cases if c.case_id == case_id), None)
    return c if c is not None and c.status == "ok" and c.timed_s else None


def plot_subject(records: list[RunRecord]) -> str:
    """The configs and short commits of a report's plots (marks.subject)."""
    return subject([str(r.config.get("name", "")) for r in records], [label(r) for r in records])


def _count(case: CaseRecord | None) -> int | None:
    return len(case.timed_s) if case is not None else None


def _busy(record: RunRecord, case_id: str, level: float) -> bool:
    """The case measured while other processes held the CPU past `level` (judge.busy)."""
    c = next((c for c in record.cases if c.case_id == case_id), None)
    return c is not None and busy(c.load, level)


def _items_per_s(case: CaseRecord | None) -> tuple[float | None, tuple[float, float] | None]:
    s = case.metrics.throughput_items_per_s if case is not None else None
    return (None, None) if s is None else (s.median, (s.min, s.max))


def _ms_range(case: CaseRecord | None) -> tuple[float, float] | None:
    n = items_of(case) if case is not None else None
    if not n:
        return None
    return 1e3 * min(case.timed_s) / n, 1e3 * max(case.timed_s) / n


def throughput_bars(records: list[RunRecord], names: list[str], pairs: list[Pair]
                    ) -> tuple[list[str], list[Bars]]:
    """Per case, every artifact's median items/s (whiskers: slowest to fastest run); an
    artifact compared with a baseline is coloured by its verdicts, the baseline grey."""
    ids = case_ids(records)
    bases = {p.base.run_id for p in pairs}
    verdicts = {p.new.run_id: {c.case_id: c.verdict for c in p.comp.cases} for p in pairs}
    level = pairs[0].comp.busy_level if pairs else BUSY_LEVEL
    sides = []
    for rec, name in zip(records, names, strict=True):
        got = [_items_per_s(_ok(rec, i)) for i in ids]
        sides.append(Bars(name, [g[0] for g in got], [g[1] for g in got],
                          [verdicts.get(rec.run_id, {}).get(i) for i in ids],
                          baseline=rec.run_id in bases and rec.run_id not in verdicts,
                          counts=[_count(_ok(rec, i)) for i in ids],
                          busy=[_busy(rec, i, level) for i in ids]))
    return ids, sides


def comparison_data(pairs: list[Pair], names: dict[str, str]
                    ) -> tuple[list[str], list[Bars], list[Change]]:
    """The cases with a change in any comparison; the baseline's and each new artifact's
    ms per item (the statistic's centres; whiskers: fastest to slowest run); each
    comparison's change of time per item with its interval and verdict."""
    ids = [i for i in case_ids([p.new for p in pairs])
           if any(c.case_id == i and c.latency_change is not None
                  for p in pairs for c in p.comp.cases)]
    by = [{c.case_id: c for c in p.comp.cases} for p in pairs]
    base = pairs[0]
    level = base.comp.busy_level
    times = [Bars(names.get(base.base.run_id, base.comp.base),
                  [by[0][i].base_ms_per_item if i in by[0] else None for i in ids],
                  [_ms_range(_ok(base.base, i)) for i in ids], [None] * len(ids),
                  baseline=True, counts=[_count(_ok(base.base, i)) for i in ids],
                  busy=[_busy(base.base, i, level) for i in ids])]
    changes = []
    for p, cases in zip(pairs, by, strict=True):
        got = [cases.get(i) for i in ids]
        name = names.get(p.new.run_id, p.comp.new)
        busy_new = [_busy(p.new, i, level) for i in ids]
        times.append(Bars(name, [c.new_ms_per_item if c else None for c in got],
                          [_ms_range(_ok(p.new, i)) for i in ids],
                          [c.verdict if c else None for c in got],
                          counts=[_count(_ok(p.new, i)) for i in ids], busy=busy_new))
        changes.append(Change(name, [c.latency_change if c else None for c in got],
                              [c.latency_low if c else None for c in got],
                              [c.latency_high if c else None for c in got],
                              [c.verdict if c else None for c in got],
                              busy=[b or _busy(p.base, i, level)
                                    for b, i in zip(busy_new, ids, strict=True)]))
    return ids, times, changes


def comparison_plot(pairs: list[Pair], names: dict[str, str], path: Path) -> Path | None:
    if not pairs:
        return None
    ids, times, changes = comparison_data(pairs, names)
    comp = pairs[0].comp
    return plots.comparison_chart(ids, times, changes, path, comp.threshold,
                                  f"{1 - comp.alpha:.0%}",
                                  plot_subject([pairs[0].base] + [p.new for p in pairs]))

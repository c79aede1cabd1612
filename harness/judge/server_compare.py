"""A server under test's capacity and cold starts between two runs (pure: case records in,
changes out), judged like time (docs/verdicts.md, "Capacity and cold starts").

**Capacity** (an http case with `slo:`): the time per item at the budget, 1 / (items/s) of
each repeat at the rate found, new / base - 1: `+` = worse (less capacity). The interval is
the between-run interval of compare (harness/stats/significance.py) over the repeats, one
process a side; the threshold is at least the search's precision, since the search cannot
tell rates closer than that apart. A side whose search found no capacity (the budget
never bound, or was never met, or its client fell behind) leaves the change inconclusive,
naming the side.

**Cold starts** (an http case with `cold_start:`): launch to ready (`ready_s`) and the
first request (`first_ms`), new / base - 1, `+` = slower; each launch is one sample (one
fresh process), so a verdict needs at least MIN_LAUNCHES launches a side. A regression of
either is the case verdict `cold start regression` where nothing worse was found.

Both follow the busy rule: a side measured while other processes held more than the busy
level of the CPU leaves the change inconclusive.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..records import CaseRecord
from ..stats.significance import Test, between_runs
from ..verdicts import INCONCLUSIVE, UNTESTED
from .busy import busy_reason

MIN_REPEATS = 3  # repeats at the rate found, a side, for a capacity verdict
MIN_LAUNCHES = 3  # cold starts a side for a cold-start verdict

Verdict = Callable[..., tuple[str, str]]  # compare.timing_verdict


@dataclasses.dataclass(frozen=True)
class MetricChange:
    """One server metric between two runs: `change` = new / base - 1 of a time-like
    quantity (+ = worse), its interval, the per-side centres in `unit`, and the verdict."""

    name: str  # "capacity at p99 <= 500 ms", "launch to ready", "first request"
    unit: str  # of base and new: "ms per item", "s", "ms"
    base: float | None
    new: float | None
    change: float | None
    low: float | None
    high: float | None
    verdict: str
    reason: str
    test: Test | None = None


def _units(values: list[float | None]) -> list[list[float]]:
    return [[v] for v in values if v is not None and v > 0]


def _judge(name: str, unit: str, base: list[list[float]], new: list[list[float]],
           threshold: float, gate, verdict: Verdict, loads: dict) -> MetricChange:
    """The between-run test of two sides' samples (each a list of one-sample units)."""
    test = between_runs(base, new, gate.floor, gate.alpha)
    word, why = verdict(test.ratio, test.low, test.high, test.significant, threshold,
                        f"{1 - gate.alpha:.0%}")
    busy = busy_reason(loads, gate.busy_level)
    if busy is not None:
        word, why = INCONCLUSIVE, f"{busy} (it shows {test.ratio - 1:+.1%})"
    return MetricChange(name=name, unit=unit, base=test.base_s, new=test.new_s,
                        change=test.ratio - 1, low=test.low - 1, high=test.high - 1,
                        verdict=word, reason=why, test=test)


def capacity_change(base: CaseRecord, new: CaseRecord, gate, verdict: Verdict
                    ) -> MetricChange | None:
    """The capacity change of two slo cases (module docstring); None without `slo`."""
    if base.slo is None or new.slo is None:
        return None
    s = new.slo
    name = f"capacity at p{s.percentile:g} <= {s.budget_ms:g} ms"
    sides = {"base": base.slo, "new": new.slo}
    lost = [f"{k} side: {v.note or v.status}" for k, v in sides.items() if v.status != "found"]
    if lost:
        return MetricChange(name, "ms per item", None, None, None, None, None,
                            INCONCLUSIVE, "no capacity found on the " + "; ".join(lost))
    units = {k: [[1000.0 / r.items_per_s] for r in v.repeats if r.items_per_s]
             for k, v in sides.items()}  # ms per item at the budget, one repeat each
    if min(len(u) for u in units.values()) < MIN_REPEATS:
        n = "+".join(str(len(u)) for u in units.values())
        return MetricChange(name, "ms per item", None, None, None, None, None, UNTESTED,
                            f"{n} repeats at the rate found: at least {MIN_REPEATS} a side "
                            "are needed")
    threshold = max(gate.threshold, base.slo.precision, s.precision)
    out = _judge(name, "ms per item", units["base"], units["new"], threshold, gate, verdict,
                 {"base": base.load, "new": new.load})
    if threshold > gate.threshold:
        out = dataclasses.replace(out, reason=f"{out.reason} (threshold: the search's "
                                              f"precision {threshold:.0%})")
    return out


def cold_start_changes(base: CaseRecord, new: CaseRecord, gate, verdict: Verdict
                       ) -> list[MetricChange]:
    """Launch to ready and the first request between two cases with cold starts."""
    if base.cold_start is None or new.cold_start is None:
        return []
    out = []
    loads = {"base": base.cold_start.load, "new": new.cold_start.load}
    for name, field, unit in (("launch to ready", "ready_s", "s"),
                              ("first request", "first_ms", "ms")):
        sides = [_units([getattr(x, field) for x in c.cold_start.launches])
                 for c in (base, new)]
        if min(map(len, sides)) < MIN_LAUNCHES:
            out.append(MetricChange(name, unit, None, None, None, None, None, UNTESTED,
                                    f"{len(sides[0])}+{len(sides[1])} launches: at least "
                                    f"{MIN_LAUNCHES} a side are needed"))
            continue
        out.append(_judge(name, unit, sides[0], sides[1], gate.threshold, gate, verdict,
                          loads))
    return out


def capacity_timing(c: MetricChange) -> dict:
    """A case's timing fields (compare.CaseChange) from its capacity change: the time per
    item at the budget is the case's time."""
    items = (lambda x: None if x is None else 1 / (1 + x) - 1)  # noqa: E731
    return dict(latency_change=c.change, latency_low=c.low, latency_high=c.high,
                items_per_s_change=items(c.change), items_per_s_low=items(c.high),
                items_per_s_high=items(c.low), base_ms_per_item=c.base,
                new_ms_per_item=c.new, test=c.test, verdict=c.verdict,
                reason=f"{c.name}: {c.reason}")

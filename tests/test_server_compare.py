"""compare judges a server's capacity and cold starts like time (harness/stats/
server_compare.py): + = worse, the interval from the repeats at the rate found (capacity)
or from the launches (cold starts), the search's precision as the least threshold, the busy
rule, untested below 3 samples a side, and a side without capacity named."""

from __future__ import annotations

from pathlib import Path

import pytest

from mibench.harness.judge.compare import compare
from mibench.harness.records import (
    CaseLoad,
    ColdStartLaunch,
    ColdStartRecord,
    SloRecord,
    SloStep,
    read_artifact,
)

REAL = Path(__file__).parent / "data" / "reports" / "real-smoke.json"
CASE = "jax/chunked/chunk_size=4/tp=1"


def step(rate: float, items_per_s: float) -> SloStep:
    return SloStep(rate=rate, seed=0, sent=36, ok=36, error_rate=0.0, items_per_s=items_per_s,
                   meets=True, why="p90 within")


def slo(items_per_s: list[float], status: str = "found", precision: float = 0.1
        ) -> SloRecord:
    rate = items_per_s[0] / 3 if items_per_s else None
    return SloRecord(percentile=90, budget_ms=100, max_error_rate=0, precision=precision,
                     requests_per_step=36, min_requests=36, samples_why="", start_rate=1,
                     min_rate=0.1, max_rate=100, max_steps=16, status=status,
                     rate=rate if status == "found" else None,
                     bound=rate * 1.1 if status == "found" else None,
                     repeats=[step(rate or 1, x) for x in items_per_s],
                     note=f"the search says {status}")


def cold(ready_s: list[float], first_ms: list[float], share: float = 0.0) -> ColdStartRecord:
    load = CaseLoad(window_s=10, cpus=2, other_share=share, other_cpu_s=0, source="test")
    return ColdStartRecord(warm_requests=3, load=load, launches=[
        ColdStartLaunch(launch=i, ready_s=r, first_ms=f, warm_p50_ms=5.0)
        for i, (r, f) in enumerate(zip(ready_s, first_ms, strict=True))])


@pytest.fixture
def pair():
    base = read_artifact(REAL)
    base.cases = [c for c in base.cases if c.case_id == CASE]
    for c in base.cases:
        c.load = CaseLoad(window_s=10, cpus=2, other_share=0.0, other_cpu_s=0, source="test")
    return base, base.model_copy(deep=True)


def judged(pair, base_slo=None, new_slo=None, base_cold=None, new_cold=None, new_share=0.0):
    base, new = pair
    base.cases[0].slo, new.cases[0].slo = base_slo, new_slo
    base.cases[0].cold_start, new.cases[0].cold_start = base_cold, new_cold
    new.cases[0].load.other_share = new_share
    comp = compare(base, new)
    (case,) = comp.cases
    return comp, case


def test_less_capacity_is_a_regression_with_time_per_item_at_the_budget_up(pair):
    comp, c = judged(pair, slo([120, 118, 122]), slo([60, 61, 59]))
    assert c.verdict == "regression" and comp.exit_code == 1
    assert c.capacity.name == "capacity at p90 <= 100 ms" and c.capacity.unit == "ms per item"
    assert c.latency_change == pytest.approx(1.0, rel=0.05)  # + = worse
    assert c.latency_change > c.latency_low > 0
    assert c.items_per_s_change == pytest.approx(-0.5, rel=0.05)
    assert c.base_ms_per_item == pytest.approx(1000 / 120, rel=0.02)
    comp, c = judged(pair, slo([60, 61, 59]), slo([120, 118, 122]))
    assert c.verdict == "improvement" and c.latency_change < 0


def test_the_same_capacity_is_unchanged_or_inconclusive_never_a_regression(pair):
    comp, c = judged(pair, slo([100, 101, 99]), slo([100, 99, 101]))
    assert c.verdict in ("unchanged", "inconclusive") and comp.exit_code == 0
    assert abs(c.latency_change) < 0.02


def test_the_searchs_precision_is_the_least_threshold(pair):
    """A 15% drop within a 25% precision: the search cannot tell those rates apart."""
    comp, c = judged(pair, slo([100, 100.5, 99.5], precision=0.25),
                     slo([87, 87.5, 86.5], precision=0.25))
    assert c.verdict != "regression" and "precision 25%" in c.reason


def test_a_side_without_capacity_a_busy_side_and_too_few_repeats_decide_nothing(pair):
    comp, c = judged(pair, slo([100, 101, 99]), slo([], status="not bound"))
    assert c.verdict == "inconclusive" and "new side: the search says not bound" in c.reason
    comp, c = judged(pair, slo([120, 118, 122]), slo([60, 61, 59]), new_share=0.6)
    assert c.verdict == "inconclusive" and "new side: other processes held 60%" in c.reason
    comp, c = judged(pair, slo([120, 118]), slo([60, 61]))
    assert c.verdict == "untested" and "at least 3 a side" in c.reason


def test_slower_cold_starts_are_a_cold_start_regression(pair):
    comp, c = judged(pair, base_cold=cold([5.0, 5.2, 4.9], [300, 310, 290]),
                     new_cold=cold([10.0, 10.4, 9.9], [300, 305, 295]))
    ready, first = c.cold_start
    assert (ready.name, ready.verdict) == ("launch to ready", "regression")
    assert first.name == "first request" and first.verdict in ("unchanged", "inconclusive")
    assert ready.change == pytest.approx(1.0, rel=0.05) and ready.unit == "s"
    assert c.verdict == "cold start regression" and c.regression and comp.exit_code == 1
    comp, c = judged(pair, base_cold=cold([5.0, 5.2], [300, 310]),
                     new_cold=cold([10.0, 10.4], [300, 305]))
    assert [x.verdict for x in c.cold_start] == ["untested", "untested"]
    assert c.verdict != "cold start regression"
    comp, c = judged(pair, base_cold=cold([5.0, 5.2, 4.9], [300, 310, 290]),
                     new_cold=cold([10.0, 10.4, 9.9], [300, 305, 295], share=0.7))
    assert c.cold_start[0].verdict == "inconclusive" and not c.regression

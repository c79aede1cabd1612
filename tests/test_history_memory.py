"""`mibench history` trends a case's own peak memory beside its time: the current peak
against the lowest of its kind (+ = larger); bounds and older artifacts' rss are not
trended, and the reason is shown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mibench.harness.judge.history import build_history
from mibench.harness.records import read_artifact
from mibench.harness.report.changes import history_json, history_tables

DATA = Path(__file__).parent / "data" / "reports"
CASE = "jax/packed/mask=segment/tp=1"


def timeline(peaks: list[tuple[int | None, str | None]]):
    base = read_artifact(DATA / "base.json")
    out = []
    for k, (peak, source) in enumerate(peaks):
        r = base.model_copy(deep=True)
        r.run_id = f"r{k}"
        r.provenance.git.commit = f"{k:07d}" + "0" * 33
        r.started_at = f"2026-02-{k + 1:02d}T00:00:00Z"
        for c in r.cases:
            c.metrics = c.metrics.model_copy(update=dict(peak_memory_bytes=peak,
                                                         peak_memory_source=source))
        out.append(r)
    return build_history(out, CASE)


def test_memory_trended_beside_time():
    gib = 1 << 30
    hist = timeline([(2 * gib, "device"), (2 * gib, "device"), (int(2.5 * gib), "device")])
    (s,) = hist.series
    assert s.memory_change == pytest.approx(0.25) and s.lowest_memory.run_id == "r0"
    summary, (series,) = history_tables(hist)
    assert "Peak memory, current vs lowest" in summary.header
    assert summary.rows[0][summary.header.index("Peak memory, current vs lowest")] == \
        "2.5 GiB (+25.0% vs 2.0 GiB at 00000000)"
    assert [r[series.header.index("Peak memory")] for r in series.rows] == \
        ["2.0 GiB (device)", "2.0 GiB (device)", "2.5 GiB (device)"]
    assert "+ = larger" in summary.note
    data = json.loads(history_json(hist))
    assert data["series"][0]["memory_change"] == pytest.approx(0.25)
    assert data["series"][0]["points"][2]["peak_memory_bytes"] == int(2.5 * gib)


def test_memory_of_other_kinds_is_not_trended():
    gib = 1 << 30
    # a CPU rise earlier does not count against a device peak now; a bound is not trended
    (s,) = timeline([(gib, "rss-rise"), (2 * gib, "device")]).series
    assert s.memory_change == 0
    summary, _ = history_tables(timeline([(gib, "rss-rise"), (2 * gib, "device")]))
    assert summary.rows[0][4] == "2.0 GiB (the lowest)"
    (s,) = timeline([(gib, "device"), (2 * gib, "device-bound")]).series
    assert s.memory_change is None
    summary, _ = history_tables(timeline([(gib, "device"), (2 * gib, "device-bound")]))
    assert summary.rows[0][4] == "<= 2.0 GiB (device-bound: not trended)"
    summary, _ = history_tables(timeline([(None, None), (None, None)]))
    assert summary.rows[0][4] == "-"

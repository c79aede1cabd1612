"""Bencher Metric Format (https://bencher.dev/docs/reference/bencher-metric-format/): one
benchmark per ok case, `CONFIG/CASE_ID #MEASUREMENT_ID` (the measurement's id, as `compare`
and `history` key a series: cases of one id that differ in workload, model, dtype,
topology or hardware stay apart; with ` @RUN_ID` when several artifacts have it),
with Bencher's built-in measures: `throughput` (items/s) and `latency` (nanoseconds per
item), each the case's median run with its slowest and fastest as `lower_value` and
`upper_value` (the artifact's own summaries: nothing is recomputed here)."""

from __future__ import annotations

import json
from collections import Counter

from ...judge.comparable import measurement_id

NAME, SUFFIX = "bmf", ".json"


def export(records) -> str:
    ok = [(r, c) for r in records for c in r.cases
          if c.status == "ok" and c.metrics.throughput_items_per_s is not None
          and c.metrics.latency_per_item_ms is not None]
    def key(r, c) -> str:
        return f"{r.config.get('name')}/{c.case_id} #{measurement_id(r, c)}"

    names = Counter(key(r, c) for r, c in ok)
    out = {}
    for r, c in ok:
        name = key(r, c)
        rate, ms = c.metrics.throughput_items_per_s, c.metrics.latency_per_item_ms
        out[name if names[name] == 1 else f"{name} @{r.run_id}"] = {
            "throughput": {"value": rate.median, "lower_value": rate.min,
                           "upper_value": rate.max},
            "latency": {"value": 1e6 * ms.median, "lower_value": 1e6 * ms.min,
                        "upper_value": 1e6 * ms.max}}
    return json.dumps(out, indent=1) + "\n"

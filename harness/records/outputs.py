"""The versioned JSON outputs that are not artifacts (printed or exported for other tools,
never read back, so no pydantic record): each schema name and what its versions changed.
The artifacts' names live beside their records (run.py, ab.py, compile.py, nightly.py)."""

from __future__ import annotations

# `mibench compare --format json` (harness/report/changes.py). /2: the timing
# verdicts are regression, improvement, unchanged (the whole interval within the threshold)
# and inconclusive (was `noise`, and part of `unchanged`); the cases carry latency_low/high
# and the per-side ms/item. /3: the items/s change `change`, `low`, `high` is renamed
# `items_per_s_change`, `items_per_s_low`, `items_per_s_high` (the primary change is
# latency_change: time per item, + = slower); each case carries `base_other_load`,
# `new_other_load`; the top level `busy_level` and `busy` (the busy sides, or null)
COMPARE_SCHEMA = "mibench.compare/3"
# `mibench history --format json` (the same module). /2: series are measurements
# (`identity`, `label`); points carry `other_load`; change points carry `latency_change`
# (time, + = slower) and `items_per_s_change`; suspected steps (`steps`); `skipped`
# artifacts of other kinds; `noise` says what the floor came from
HISTORY_SCHEMA = "mibench.history/2"
# `mibench export --format json` (harness/report/exporters/json.py). /2 adds the columns
# `measurement_id` and `other_load`
EXPORT_SCHEMA = "mibench.export/2"
# `mibench compare --format json` on two compile artifacts (harness/report/compile_changes.py)
COMPILE_COMPARE_SCHEMA = "mibench.compile-compare/1"

"""JSON: `{"schema": "mibench.export/2", "columns": [...], "rows": [{...}, ...]}`, the rows of
the CSV export as objects (/2 adds the columns `measurement_id` and `other_load`)."""

from __future__ import annotations

import json

from ...records.outputs import EXPORT_SCHEMA
from .rows import COLUMNS, case_rows

NAME, SUFFIX = "json", ".json"


def export(records) -> str:
    data = {"schema": EXPORT_SCHEMA, "columns": COLUMNS, "rows": case_rows(records)}
    return json.dumps(data, indent=1) + "\n"

"""CSV: one line per case and timed run, the columns of `rows.COLUMNS`."""

from __future__ import annotations

import csv
import io

from mibench.harness.report.exporters.rows import COLUMNS, case_rows

NAME, SUFFIX = "csv", ".csv"


def export(records) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(case_rows(records))
    return out.getvalue()

"""CSV: one line per case and timed run, the columns of `rows.COLUMNS`.

Safe to open in a spreadsheet (OWASP's CSV injection advice): a text cell that begins with
`=`, `+`, `-`, `@`, a tab or a carriage return (which a spreadsheet would run as a formula:
a git branch may be called `@SUM(1+1)`) gets a `'` in front, so it is shown as the text
it is; numbers, negative ones included, are written as numbers, and a text cell that is a
plain number (`-12.5`) is left as it is."""

from __future__ import annotations

import csv
import io
import re

from .rows import COLUMNS, case_rows

NAME, SUFFIX = "csv", ".csv"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def safe_cell(value):
    """`value`, with a `'` in front when it is text a spreadsheet would take for a
    formula (module docstring)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS) \
            and not NUMBER.fullmatch(value):
        return "'" + value
    return value


def export(records) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: safe_cell(v) for k, v in row.items()} for row in case_rows(records))
    return out.getvalue()

"""`mibench export ARTIFACT... --format csv|bmf|json`: the cases of run artifacts for other
tools (a spreadsheet, Bencher, a notebook): one exporter per format
(harness/report/exporters/). One run is one point: a second artifact of a run (a copy) is
left out, one line on stderr (harness.judge.duplicates)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import (
    CaseGlobs,
    choices,
    guarded,
    load,
    out_file,
    select_records,
    write_text,
)

FORMATS = ("csv", "json", "bmf")  # harness/report/exporters' EXPORTERS (a test keeps them one)


@guarded
def export(artifacts: Annotated[list[Path], typer.Argument(help="Run artifacts (JSON).")],
           format: Annotated[str, typer.Option(
               "--format", metavar=choices(FORMATS),
               help="csv: one line per case and timed run; json: the same rows; bmf: "
                    "Bencher Metric Format (throughput, latency per case).")] = "csv",
           out: Annotated[Path | None, typer.Option(
               help="Write FILE, or into a folder: cases.csv or cases.json there "
                    "(default: stdout).")] = None,
           case: CaseGlobs = None):
    """Export the cases of ARTIFACTS as CSV, JSON rows or Bencher Metric Format."""
    from ..judge.duplicates import unique_runs
    from ..report.exporters import EXPORTERS

    out = out_file(out, f"cases{EXPORTERS.lookup(format).SUFFIX}")
    records, again = unique_runs([load(p) for p in artifacts], artifacts)
    for line in again:
        print(line, file=sys.stderr)
    write_text(out, export_records(records, format, case))


def export_artifacts(paths: list[Path], format: str, globs: list[str] | None = None) -> str:
    """The text of `format` for the artifacts' (selected) cases, each run once
    (harness.judge.duplicates: a copy of an artifact adds no rows)."""
    from ..judge.duplicates import unique_runs

    return export_records(unique_runs([load(p) for p in paths], paths)[0], format, globs)


def export_records(records: list, format: str, globs: list[str] | None = None) -> str:
    """The text of `format` for the records' (selected) cases."""
    from ..report.exporters import EXPORTERS

    return EXPORTERS.lookup(format).export(select_records(records, globs))

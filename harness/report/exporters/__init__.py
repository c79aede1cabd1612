"""Exports of run artifacts, one small module per format behind one interface (hyperfine's
exporters): each module has `NAME`, `SUFFIX` and `export(records) -> str`, and `EXPORTERS`
maps a format's name to its module. Every exporter formats `rows.case_rows`; none computes
a statistic of its own.

    csv    one line per case and timed run (`rows.COLUMNS`)
    json   the same rows as a JSON object (`mibench.export/1`)
    bmf    Bencher Metric Format: per case, `throughput` (items/s) and `latency` (ns per
           item), each the median with the slowest and fastest run as its bounds

`frame.cases_frame(artifacts)` gives the same rows as a pandas DataFrame (pandas: the
`frame` extra, imported when called).
"""

from __future__ import annotations

from types import ModuleType

from mibench.errors import MibenchError

from . import bmf, csv, json
from .frame import cases_frame

__all__ = ["EXPORTERS", "cases_frame", "exporter"]

EXPORTERS: dict[str, ModuleType] = {m.NAME: m for m in (csv, json, bmf)}


def exporter(name: str) -> ModuleType:
    """The exporter of format `name`, or a MibenchError naming --format."""
    if name not in EXPORTERS:
        raise MibenchError(f"unknown format {name!r} ({', '.join(EXPORTERS)})",
                           field="--format")
    return EXPORTERS[name]

"""Exports of run artifacts, one small module per format behind one interface (hyperfine's
exporters): each module has `NAME`, `SUFFIX` and `export(records) -> str`, and `EXPORTERS`
maps a format's name to its module. Every exporter formats `rows.case_rows`; none computes
a statistic of its own.

    csv    one line per case and timed run (`rows.COLUMNS`)
    json   the same rows as a JSON object (`mibench.export/1`)
    bmf    Bencher Metric Format: per case, `throughput` (items/s) and `latency` (ns per
           item), each the median with the slowest and fastest run as its bounds

A new format: its module here and one `EXPORTERS.add` line (docs/design.md); the
renderers' registry (renderers.py) then has it as `export-<format>` too.
`frame.cases_frame(artifacts)` gives the same rows as a pandas DataFrame (pandas: the
`frame` extra, imported when called).
"""

from __future__ import annotations

from types import ModuleType

from mibench.registry import Registry

from . import bmf, csv, json
from .frame import cases_frame

__all__ = ["EXPORTERS", "cases_frame"]

# format name -> its module; `EXPORTERS.lookup(name)`: an unknown one names --format
EXPORTERS: Registry[ModuleType] = Registry("format", field="--format")
for _module in (csv, json, bmf):
    EXPORTERS.add(_module.NAME, _module)

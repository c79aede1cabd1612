"""Every renderer, one interface: a computed record in, text or files out. Each lives in a
module of harness/report/ and only formats (the judgement is harness/judge/'s). One registry
(mibench/registry.py), entries imported on first lookup; two shapes, told apart by the
second parameter:

- text: `render(record, **options) -> str`, the record first (a report's context, a
  `Comparison`, a `History`, a `CompileComparison`, an `ABRecord`, compile or run
  records), options by keyword with defaults; the caller prints or writes the text.
- files: `render(record, out: Path, **options)` writes at or beside `out` (the same paths
  and names every time) and returns what it wrote: the plots' name -> file name (a plot
  with nothing to draw left out), or the site's `Built`.

    RENDERERS.lookup("compare")(comparison, note=None)          # Markdown
    RENDERERS.lookup("history-plots")(history, Path("h.md"))    # h-trends.png beside it
    RENDERERS.lookup("site")([Path("history")], Path("site"))   # a folder

Exporters are text renderers of run records: each format of exporters/ (`EXPORTERS`, the
names `--format` takes) is here as `export-<format>`, its module's `export(records)`,
bridged from `EXPORTERS` on the first lookup (a format is added in one place: the exporter
recipe of docs/design.md). The plot functions of plots.py and trends.py (plain data in, one
PNG out) are what the file renderers draw with, not renderers of their own.
"""

from __future__ import annotations

from mibench.registry import Registry

EXPORT = "export-"  # an exporter's name here: EXPORT + its format


def _exporters(registry: Registry) -> None:
    from .exporters import EXPORTERS

    for name, module in EXPORTERS.items():
        registry.add(EXPORT + name, module.export)


RENDERERS = Registry("renderer", fill=_exporters)
# text: record in, str out
RENDERERS.add("report", "mibench.harness.report:render")  # context, name="report.md.j2"
RENDERERS.add("compare", "mibench.harness.report.changes:compare_markdown")
RENDERERS.add("compare-json", "mibench.harness.report.changes:compare_json")
RENDERERS.add("history", "mibench.harness.report.changes:history_markdown")
RENDERERS.add("history-json", "mibench.harness.report.changes:history_json")
RENDERERS.add("compile-compare",
              "mibench.harness.report.compile_changes:compile_compare_markdown")
RENDERERS.add("compile-compare-json",
              "mibench.harness.report.compile_changes:compile_compare_json")
RENDERERS.add("compile-fit", "mibench.harness.report.compile:render_fit")
RENDERERS.add("ab", "mibench.harness.report.ab:render_markdown")
# files: record and `out` in, the files written
RENDERERS.add("report-plots", "mibench.harness.report:draw_plots")  # context, FILE.md
RENDERERS.add("history-plots", "mibench.harness.report.trends:history_plots")
RENDERERS.add("site", "mibench.harness.report.site:build_site")  # history folders, DIR

"""The Markdown renderers, one shape: `render(result, **options) -> str`, the computed record
first (a report's context, a `Comparison`, a `History`, a `CompileComparison`), options by
keyword; each lives in a module of harness/report/ and only formats (the judgement is
harness/judge/'s). One registry (mibench/registry.py), entries imported on first lookup:

    RENDERERS.lookup("compare")(comparison, note=None)
"""

from __future__ import annotations

from mibench.registry import Registry

RENDERERS = Registry("renderer")
RENDERERS.add("report", "mibench.harness.report:render")  # context, name="report.md.j2"
RENDERERS.add("compare", "mibench.harness.report.changes:compare_markdown")
RENDERERS.add("history", "mibench.harness.report.changes:history_markdown")
RENDERERS.add("compile-compare",
              "mibench.harness.report.compile_changes:compile_compare_markdown")

"""`mibench history DIR`: per-case trends over commits, with change points."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from .common import (
    CaseGlobs,
    Format,
    guarded,
    load,
    out_file,
    parse_format,
    write_text,
)


@guarded
def history(folder: Annotated[Path, typer.Argument(help="Folder of artifacts (searched "
                                                          "recursively).")],
            case: CaseGlobs = None,
            out: Annotated[Path | None, typer.Option(
                help="Write FILE.md (or into a folder: history.md there) and trend "
                     "plots beside it.")] = None,
            format: Format = "md"):
    """Per-case trend over commits: medians, change points, peak vs current."""
    from ..judge.history import build_history, load_dir
    from ..report.renderers import RENDERERS

    kind = parse_format(format)
    out = out_file(out, "history.md")
    found = load_dir(folder, load)
    for line in found.skipped:
        print(line, file=sys.stderr)
    hist = build_history(found.records, case or None, skipped=found.skipped,
                         where=str(folder))
    if kind == "json":
        print(RENDERERS.lookup("history-json")(hist), end="")
        return
    plots = RENDERERS.lookup("history-plots")(hist, out) if out is not None else None
    write_text(out, RENDERERS.lookup("history")(hist, plots))

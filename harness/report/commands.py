"""The `report`, `compare` and `history` commands (registered on the app in harness/cli.py):
parse arguments, call plain functions, print.

Exit codes: 0 ok (compare: no regression), 1 (compare) regression, 2 bad input: a missing
file, a file that is not a mibench artifact, an unknown schema version, a bad option; each
is one `error: ...` line on stderr, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError
from mibench.harness.run.guard import guarded

Threshold = Annotated[str, typer.Option(help="Smallest relative change that counts: 5% or "
                                             "0.05.")]
Format = Annotated[str, typer.Option("--format", help="md or json.")]


def load(path: Path):
    from mibench.harness.records import read_artifact

    return read_artifact(path)


def parse_threshold(text: str) -> float:
    """`5%` -> 0.05; `0.05` -> 0.05; a bare number of 1 or more is taken as percent."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise MibenchError("not a number (use e.g. 5% or 0.05)", field="--threshold") from None
    if text.strip().endswith("%") or value >= 1:
        value /= 100
    if not 0 <= value < 1:
        raise MibenchError("must be between 0% and 100%", field="--threshold")
    return value


def out_file(out: Path | None) -> None:
    """`--out FILE.md` must name a file (its plots go beside it), not a folder, and its
    folder must be a folder (made if missing); else a MibenchError naming --out."""
    if out is None:
        return
    out = Path(out)
    if out.is_dir():
        raise MibenchError(f"{out} is a folder; give a file, e.g. {out / 'report.md'}",
                           field="--out")
    parent = out.parent
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MibenchError(f"{parent} is a file, so {out} cannot be written under it",
                           field="--out")


def _format(text: str) -> str:
    if text not in ("md", "json"):
        raise MibenchError(f"unknown format {text!r} (md or json)", field="--format")
    return text


@guarded
def report(artifacts: Annotated[list[Path], typer.Argument(help="Artifacts (JSON) to report.")],
           baseline: Annotated[Path | None, typer.Option(
               help="Artifact to compare every other one with.")] = None,
           out: Annotated[Path | None, typer.Option(
               help="Write FILE.md and its PNG plots beside it (default: Markdown on "
                    "stdout, no plots).")] = None,
           threshold: Threshold = "5%"):
    """Markdown report of ARTIFACTS: results, speedups, A/B, parity, commits, topology."""
    from mibench.harness.report import write_report

    limit = parse_threshold(threshold)
    out_file(out)
    if len(artifacts) == 1 and baseline is None and _is_ab(artifacts[0]):
        from mibench.harness.ab.record import read_ab
        from mibench.harness.report.ab import render_markdown

        text = render_markdown(read_ab(artifacts[0]))
        if out is not None:
            out.write_text(text)
        print(f"wrote {out}" if out is not None else text, end="\n" if out else "")
        return
    records = [load(p) for p in artifacts]
    base = load(baseline) if baseline is not None else None
    text = write_report(records, out, baseline=base, threshold=limit)
    print(f"wrote {out}" if out is not None else text, end="\n" if out else "")


def _is_ab(path: Path) -> bool:
    """Whether `path` holds an A/B artifact (`mibench ab`), read from its schema field."""
    import json

    try:
        return json.loads(path.read_text()).get("schema") == "mibench.ab/1"
    except (OSError, ValueError, AttributeError, RecursionError):
        return False  # `load` names what is wrong with it


@guarded
def compare(base: Annotated[Path, typer.Argument(help="Baseline artifact.")],
            new: Annotated[Path, typer.Argument(help="New artifact.")],
            threshold: Threshold = "5%", format: Format = "md"):
    """Regression verdict of NEW against BASE: exit 0 none, 1 regression, 2 bad input."""
    from mibench.harness.report.export import compare_json, compare_markdown
    from mibench.harness.stats.compare import compare as compare_records

    limit, kind = parse_threshold(threshold), _format(format)
    result = compare_records(load(base), load(new), threshold=limit)
    print(compare_json(result) if kind == "json" else compare_markdown(result), end="")
    raise typer.Exit(1 if result.regression else 0)


@guarded
def history(folder: Annotated[Path, typer.Argument(help="Folder of artifacts (searched "
                                                          "recursively).")],
            case: Annotated[str | None, typer.Option(help="Only this case id.")] = None,
            out: Annotated[Path | None, typer.Option(
                help="Write FILE.md and trend plots beside it.")] = None,
            format: Format = "md"):
    """Per-case trend over commits: medians, change points, peak vs current."""
    from mibench.harness.report.export import history_json, history_markdown, history_plots
    from mibench.harness.stats.history import build_history, load_dir

    kind = _format(format)
    out_file(out)
    hist = build_history(load_dir(folder, load), case)
    if kind == "json":
        print(history_json(hist), end="")
        return
    text = history_markdown(hist, history_plots(hist, out) if out is not None else None)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}")
    else:
        print(text, end="")

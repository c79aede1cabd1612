"""The `report`, `compare` and `history` commands (registered on the app in harness/cli.py):
parse arguments, call plain functions, print.

Exit codes: 0 ok (compare: no regression), 1 (compare) a regression or untested cases, 2
nothing comparable (compare) or bad input: a missing file, a file that is not a mibench
artifact or cannot be compared, an unknown schema version, a bad option; each is one
`error: ...` line on stderr, never a traceback.
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


def parse_threshold(text: str, field: str = "--threshold") -> float:
    """`5%` -> 0.05; `0.05` -> 0.05; a bare number of 1 or more is taken as percent. A bad
    value is a MibenchError naming `field` (the option it came from)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise MibenchError("not a number (use e.g. 5% or 0.05)", field=field) from None
    if text.strip().endswith("%") or value >= 1:
        value /= 100
    if not 0 <= value < 1:
        raise MibenchError("must be between 0% and 100%", field=field)
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
           threshold: Threshold = "5%",
           summary: Annotated[bool, typer.Option(
               "--summary", help="The job-summary variant (e.g. for $GITHUB_STEP_SUMMARY): "
                                 "no plots and no image links.")] = False):
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
    if baseline is None and all(_is_compile(p) for p in artifacts):
        from mibench.harness.report.compile import render_fit
        from mibench.harness.run.compile_records import read_compile_artifact

        text = render_fit([read_compile_artifact(p) for p in artifacts])
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(text)
        print(f"wrote {out}" if out is not None else text, end="\n" if out else "")
        return
    comparing = baseline is not None or len(artifacts) > 1
    records = [(load_checked if comparing else load)(p) for p in artifacts]
    base = load_checked(baseline) if baseline is not None else None
    text = write_report(records, out, baseline=base, threshold=limit, summary=summary)
    print(f"wrote {out}" if out is not None else text, end="\n" if out else "")


def _schema_of(path: Path) -> str | None:
    """The schema field of the JSON file at `path`, or None (`load` names what is wrong)."""
    import json

    try:
        return json.loads(path.read_text()).get("schema")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None


def _is_ab(path: Path) -> bool:
    """Whether `path` holds an A/B artifact (`mibench ab`), read from its schema field."""
    return _schema_of(path) == "mibench.ab/1"


def _is_compile(path: Path) -> bool:
    """Whether `path` holds a compile artifact (`mibench compile`), from its schema field."""
    return _schema_of(path) == "mibench.compile/1"


def load_checked(path: Path):
    """An artifact fit for a comparison: readable, and `invalid` finds nothing (the error
    names the file and the case)."""
    from mibench.harness.stats.comparable import invalid

    record = load(path)
    why = invalid(record)
    if why:
        raise MibenchError(f"cannot be compared: {why}", field=str(path))
    return record


def parse_floor(text: str | None, folder: Path | None):
    """The noise floor of `--noise-floor` or `--noise-from` (not both), or None (the
    device platform's default)."""
    from mibench.harness.stats.significance import NoiseFloor

    if text is not None and folder is not None:
        raise MibenchError("give --noise-floor or --noise-from, not both", field="--noise-floor")
    if text is not None:
        return NoiseFloor(parse_threshold(text, "--noise-floor"), "--noise-floor")
    if folder is not None:
        from mibench.harness.stats.history import aa_noise, load_dir

        return aa_noise(load_dir(folder, load), str(folder))
    return None


@guarded
def compare(base: Annotated[Path, typer.Argument(help="Baseline artifact.")],
            new: Annotated[Path, typer.Argument(help="New artifact.")],
            threshold: Threshold = "5%", format: Format = "md",
            noise_floor: Annotated[str | None, typer.Option(
                help="Between-run spread of one run's median (e.g. 10%); default 10% on a "
                     "CPU, 3% on a GPU or TPU.")] = None,
            noise_from: Annotated[Path | None, typer.Option(
                help="Learn the noise floor from A/A runs: a folder of artifacts with two "
                     "or more of one commit.")] = None,
            allow_untested: Annotated[bool, typer.Option(
                help="Pass the gate even when cases have fewer than 3 timed runs on a "
                     "side.")] = False,
            rebaseline: Annotated[bool, typer.Option(
                help="Accept NEW as the new baseline whatever the verdict (exit 0, a line "
                     "'rebaselined: ...'); NEW must have an ok case.")] = False,
            cost_threshold: Annotated[str, typer.Option(
                help="Compile artifacts (`mibench compile`): the growth of a case's peak "
                     "HBM, bytes accessed or FLOPs that fails the gate.")] = "5%"):
    """Regression verdict of NEW against BASE: exit 0 none, 1 regression or untested cases,
    2 nothing comparable or bad input."""
    from mibench.harness.report.export import compare_json, compare_markdown
    from mibench.harness.stats.compare import compare as compare_records

    limit, kind = parse_threshold(threshold), _format(format)
    if _is_compile(base) or _is_compile(new):
        raise typer.Exit(_compare_compile(base, new, cost_threshold, kind))
    floor = parse_floor(noise_floor, noise_from)
    old, fresh = load_checked(base), load_checked(new)
    result = compare_records(old, fresh, threshold=limit, floor=floor,
                             allow_untested=allow_untested)
    note = None
    if rebaseline:
        if not any(c.status == "ok" for c in fresh.cases):
            raise MibenchError("cannot become the baseline: none of its cases ran ok",
                               field=str(new))
        note = (f"rebaselined: {new} replaces {base} as the baseline (the gate said: "
                f"{result.outcome}, exit {result.exit_code})")
    print(compare_json(result, note) if kind == "json" else compare_markdown(result, note),
          end="")
    if rebaseline:
        print(note)
        return
    if result.outcome == "not compared":
        raise MibenchError(f"nothing compared with {base}: {result.not_compared_reason()}; "
                           "to start a new baseline pass --rebaseline", field=str(new))
    raise typer.Exit(result.exit_code)


def _compare_compile(base: Path, new: Path, cost_threshold: str, kind: str) -> int:
    """`compare` on two compile artifacts: exact costs, a threshold gate; the exit code."""
    from mibench.harness.run.compile_records import read_compile_artifact
    from mibench.harness.stats.compile_compare import (
        compare_compile,
        compile_compare_json,
        compile_compare_markdown,
    )

    if not (_is_compile(base) and _is_compile(new)):
        odd = new if _is_compile(base) else base
        raise MibenchError("is not a compile artifact; compare a compile artifact with "
                           "another", field=str(odd))
    limit = parse_threshold(cost_threshold, "--cost-threshold")
    result = compare_compile(read_compile_artifact(base), read_compile_artifact(new), limit)
    print(compile_compare_json(result) if kind == "json" else compile_compare_markdown(result),
          end="")
    return result.exit_code


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

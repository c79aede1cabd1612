"""`mibench report ARTIFACT...`: the Markdown report of run artifacts (with plots beside
FILE.md), of one A/B artifact, or of compile artifacts (their fit table)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import (
    CaseGlobs,
    Threshold,
    guarded,
    load,
    load_checked,
    out_file,
    parse_thresholds,
    schema_of,
    select_records,
    write_text,
)


def compile_artifacts(paths: list[Path]) -> list:
    """The `--compile` artifacts, each checked to be one (else an error naming the file)."""
    from ..records import COMPILE_SCHEMAS as COMPILE
    from ..records import read_compile_artifact

    for p in paths:
        if schema_of(p) not in (*COMPILE, None):  # None: unreadable, and the reader says why
            raise MibenchError(f"--compile: not a {COMPILE[-1]} artifact (write one with "
                               "`mibench compile CONFIG`)", field=str(p))
    return [read_compile_artifact(p) for p in paths]


@guarded
def report(artifacts: Annotated[list[Path], typer.Argument(help="Artifacts (JSON) to report.")],
           baseline: Annotated[Path | None, typer.Option(
               help="Artifact to compare every other one with.")] = None,
           out: Annotated[Path | None, typer.Option(
               help="Write FILE.md (or into a folder: report.md there) and its PNG "
                    "plots beside it (default: Markdown on stdout, no plots).")] = None,
           threshold: Threshold = None,
           estimates: Annotated[list[Path] | None, typer.Option(
               "--compile", help="A compile artifact (`mibench compile`) whose HBM estimates "
                                 "go beside the measured peaks; repeatable.")] = None,
           summary: Annotated[bool, typer.Option(
               "--summary", help="The PR-comment / job-summary variant (e.g. for "
                                 "$GITHUB_STEP_SUMMARY): at most 40 lines, the verdict and "
                                 "the cases to look at first, no plots.")] = False,
           references: Annotated[Path | None, typer.Option(
               help="Reference figures (YAML, e.g. configs/references/seeds.yaml) to set "
                    "beside the runs (or the compile artifacts' roofline), instead of the "
                    "artifacts' own.")] = None,
           case: CaseGlobs = None):
    """Markdown report of ARTIFACTS: results, speedups, A/B, parity, commits, topology."""
    from ..records import AB_SCHEMAS as AB
    from ..records import COMPILE_SCHEMAS as COMPILE
    from ..records import RUN_SCHEMAS as RUN
    from ..report.renderers import RENDERERS

    limit = parse_thresholds(threshold, ("time",))["time"]
    out = out_file(out, "report.md")
    kinds = {schema_of(p) for p in artifacts}
    if estimates and not kinds <= set(RUN):
        raise MibenchError("goes with run artifacts: it puts estimates beside their "
                           "measured peaks", field="--compile")
    if references is not None and not (kinds <= set(RUN) or kinds <= set(COMPILE)):
        raise MibenchError("reference figures are set beside run or compile artifacts only",
                           field="--references")
    if len(artifacts) == 1 and baseline is None and kinds <= set(AB):
        if case:
            raise MibenchError("selects the cases of run artifacts; an A/B artifact holds "
                               "the cases it measured", field="--case")
        from ..records import read_ab

        write_text(out, RENDERERS.lookup("ab")(read_ab(artifacts[0])))
        return
    from ..config.references import load_references

    refs = load_references(references) if references is not None else None
    if baseline is None and kinds <= set(COMPILE):
        from ..records import read_compile_artifact

        records = select_records([read_compile_artifact(p) for p in artifacts], case)
        write_text(out, RENDERERS.lookup("compile-fit")(records, refs))
        return
    from ..report import write_report

    comparing = baseline is not None or len(artifacts) > 1
    records = [(load_checked if comparing else load)(p) for p in artifacts]
    base = load_checked(baseline) if baseline is not None else None
    records = select_records(records + ([base] if base else []), case)
    records, base = (records[:-1], records[-1]) if base else (records, None)
    text = write_report(records, out, baseline=base, threshold=limit, summary=summary,
                        compiles=compile_artifacts(estimates or []), refs=refs)
    print(f"wrote {out}" if out is not None else text, end="\n" if out else "")

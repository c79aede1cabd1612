"""`mibench compare BASE NEW`: the regression verdict of NEW against BASE over comparable
cases (timings, scores, own peak memory, compiles during timed runs; compile artifacts:
compiled cost); exit 0 no regression, 1 a regression or untested cases, 2 nothing
comparable or bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import (
    CaseGlobs,
    Format,
    deprecated_threshold,
    guarded,
    load,
    load_checked,
    parse_format,
    parse_threshold,
    parse_thresholds,
    schema_of,
    select_records,
    threshold_option,
)

COMPILE = ("mibench.compile/1", "mibench.compile/2")


@guarded
def compare(base: Annotated[Path, typer.Argument(help="Baseline artifact.")],
            new: Annotated[Path, typer.Argument(help="New artifact.")],
            threshold: threshold_option("time", "memory", "cost") = None,
            format: Format = "md",
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
            memory_threshold: deprecated_threshold("memory") = None,
            cost_threshold: deprecated_threshold("cost") = None,
            case: CaseGlobs = None):
    """Regression verdict of NEW against BASE: exit 0 none, 1 regression or untested cases,
    2 nothing comparable or bad input."""
    from ..report.exporters.changes import compare_json, compare_markdown
    from ..stats.compare import compare as compare_records

    limits = parse_thresholds(threshold, ("time", "memory", "cost"),
                              memory=memory_threshold, cost=cost_threshold)
    limit, memory, kind = limits["time"], limits["memory"], parse_format(format)
    if set(COMPILE) & {schema_of(base), schema_of(new)}:
        raise typer.Exit(compare_compile(base, new, limits["cost"], kind, case))
    old, fresh = select_records([load_checked(base), load_checked(new)], case)
    floor = parse_floor(noise_floor, noise_from, frozenset({old.run_id, fresh.run_id}))
    result = compare_records(old, fresh, threshold=limit, floor=floor,
                             allow_untested=allow_untested, memory_threshold=memory)
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


def parse_floor(text: str | None, folder: Path | None,
                judged: frozenset[str] = frozenset()):
    """The noise floor of `--noise-floor` or `--noise-from` (not both), or None (the
    device platform's default). `--noise-from` learns it from the folder's A/A runs,
    leaving out the artifacts `judged` (by run id) and runs on a busy machine, and says
    what it used (harness.stats.noise); other kinds of artifact there are skipped, one
    line each on stderr."""
    from ..stats.significance import NoiseFloor

    if text is not None and folder is not None:
        raise MibenchError("give --noise-floor or --noise-from, not both", field="--noise-floor")
    if text is not None:
        return NoiseFloor(parse_threshold(text, "--noise-floor"), "--noise-floor")
    if folder is not None:
        from ..stats.history import load_dir
        from ..stats.noise import aa_noise

        found = load_dir(folder, load)
        for line in found.skipped:
            print(line, file=sys.stderr)
        return aa_noise(found.records, str(folder), leave_out=judged)
    return None


def compare_compile(base: Path, new: Path, limit: float, kind: str,
                    case: list[str] | None = None) -> int:
    """`compare` on two compile artifacts: exact costs, a threshold gate; the exit code."""
    from ..records import read_compile_artifact
    from ..stats.compile_compare import (
        compare_compile as compare_costs,
    )
    from ..stats.compile_compare import (
        compile_compare_json,
        compile_compare_markdown,
    )

    if not (schema_of(base) in COMPILE and schema_of(new) in COMPILE):
        odd = new if schema_of(base) in COMPILE else base
        raise MibenchError("is not a compile artifact; compare a compile artifact with "
                           "another", field=str(odd))
    old, fresh = select_records([read_compile_artifact(base), read_compile_artifact(new)], case)
    result = compare_costs(old, fresh, limit)
    print(compile_compare_json(result) if kind == "json" else compile_compare_markdown(result),
          end="")
    return result.exit_code

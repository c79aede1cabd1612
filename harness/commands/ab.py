"""`mibench ab BASE_REV NEW_REV CONFIG`: the engines of two git revisions measured in
interleaved rounds on this machine (harness/ab/); exit 0 no regression, 1 a regression
(slower, moved scores, failing, compiled cost grown), 2 nothing compared or bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.harness.commands.common import CaseGlobs, Sets, guarded, parse_threshold


@guarded
def ab(base_rev: Annotated[str, typer.Argument(help="The baseline revision (any git rev).")],
       new_rev: Annotated[str, typer.Argument(help="The revision to judge.")],
       config: Path,
       rounds: Annotated[int, typer.Option(help="Interleaved rounds (fresh workers per "
                                                 "revision per round); 3 or more.")] = 5,
       case: CaseGlobs = None,
       out: Annotated[Path, typer.Option(help="Artifact folder.")] = Path("artifacts"),
       target: Annotated[str | None, typer.Option(
           help="Also compile the JAX cases at both revisions for this TPU slice (v6e-1, "
                "v6e-4, ...; default: the config's topology.target) and gate their "
                "compiled cost.")] = None,
       compile_: Annotated[bool, typer.Option(
           "--compile/--no-compile", help="Compile for the target (when one is known).")]
       = True,
       cost_threshold: Annotated[str, typer.Option(
           help="The growth of a case's compiled peak HBM, bytes accessed or FLOPs that "
                "fails the gate.")] = "5%",
       set_: Sets = None):
    """The engines of two git revisions measured in interleaved rounds on this machine:
    exit 0 no regression, 1 a regression (slower, moved scores, failing, compiled cost
    grown), 2 nothing compared."""
    raise typer.Exit(ab_command(base_rev, new_rev, config, rounds=rounds, case_globs=case,
                                out=out, sets=set_ or [], argv=sys.argv, target=target,
                                compile_=compile_, cost_threshold=cost_threshold))


def ab_command(base_rev: str, new_rev: str, config_path: Path, *, rounds: int,
               case_globs: list[str] | None, out: Path, sets: list[str], argv: list[str],
               target: str | None = None, compile_: bool = True,
               cost_threshold: str = "5%") -> int:
    """Run the A/B, print its verdict; the exit code."""
    from mibench.engines import cache_dir
    from mibench.harness.ab.revisions import repository
    from mibench.harness.ab.rounds import exit_code, run_ab
    from mibench.harness.config import load_config
    from mibench.harness.report.ab import render_text
    from mibench.harness.run.compile import resolve_target

    config = load_config(config_path, sets)
    limit = parse_threshold(cost_threshold, "--cost-threshold")
    tpu = (resolve_target(target, config)
           if compile_ and (target or config.topology.target) else None)
    record, path = run_ab(config, repository(), base_rev, new_rev, cache_dir(), rounds=rounds,
                          case_glob=case_globs, out=out, argv=argv, target=tpu,
                          cost_threshold=limit)
    print(render_text(record, path))
    return exit_code(record)

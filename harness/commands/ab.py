"""`mibench ab BASE_REV NEW_REV CONFIG`: the engines of two git revisions measured in
interleaved rounds on this machine (harness/ab/); exit 0 no regression, 1 a regression
(slower, moved scores, failing, compiled cost grown), 2 nothing compared or bad input."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import (
    CaseGlobs,
    Sets,
    deprecated_threshold,
    folder_out,
    guarded,
    parse_thresholds,
    threshold_option,
    writable_folder,
)


@guarded
def ab(base_rev: Annotated[str, typer.Argument(help="The baseline revision (any git rev).")],
       new_rev: Annotated[str, typer.Argument(help="The revision to judge.")],
       config: Path,
       rounds: Annotated[int, typer.Option(help="Interleaved rounds (fresh workers per "
                                                 "revision per round); 3 or more.")] = 5,
       case: CaseGlobs = None,
       out: Annotated[Path, typer.Option(help="Artifact folder.", callback=folder_out)]
       = Path("artifacts"),
       target: Annotated[str | None, typer.Option(
           help="Also compile the JAX cases at both revisions for this TPU slice (v6e-1, "
                "v6e-4, ...; default: the config's topology.target) and gate their "
                "compiled cost.")] = None,
       compile_: Annotated[bool, typer.Option(
           "--compile/--no-compile", help="Compile for the target (when one is known).")]
       = True,
       threshold: threshold_option("cost") = None,
       cost_threshold: deprecated_threshold("cost") = None,
       server_repo: Annotated[Path | None, typer.Option(
           help="Judge two revisions of this server repository instead of mibench's "
                "engines: the config's launched http cases, each revision checked out once "
                "and put first on PYTHONPATH (launch.repo_path).")] = None,
       base_python: Annotated[Path | None, typer.Option(
           help="Judge two installed servers: the base side's interpreter (BASE_REV and "
                "NEW_REV are then labels).")] = None,
       new_python: Annotated[Path | None, typer.Option(
           help="The new side's interpreter (with --base-python).")] = None,
       set_: Sets = None):
    """The engines of two git revisions (or two versions of a launched server) measured in
    interleaved rounds on this machine: exit 0 no regression, 1 a regression (slower,
    moved scores, failing, compiled cost grown), 2 nothing compared."""
    if server_repo is not None or base_python is not None or new_python is not None:
        raise typer.Exit(server_ab_command(base_rev, new_rev, config, rounds=rounds,
                                           case_globs=case, out=out, sets=set_ or [],
                                           argv=sys.argv, server_repo=server_repo,
                                           pythons=(base_python, new_python)))
    raise typer.Exit(ab_command(base_rev, new_rev, config, rounds=rounds, case_globs=case,
                                out=out, sets=set_ or [], argv=sys.argv, target=target,
                                compile_=compile_,
                                cost_threshold=parse_thresholds(threshold, ("cost",),
                                                                cost=cost_threshold)["cost"]))


def ab_command(base_rev: str, new_rev: str, config_path: Path, *, rounds: int,
               case_globs: list[str] | None, out: Path, sets: list[str], argv: list[str],
               target: str | None = None, compile_: bool = True,
               cost_threshold: float = 0.05) -> int:
    """Run the A/B, print its verdict; the exit code."""
    from mibench.engines import cache_dir

    from ..ab.revisions import distinct, repository
    from ..ab.rounds import exit_code, run_ab
    from ..compile.runner import resolve_target
    from ..config import load_config
    from ..report.ab import render_text

    distinct(repository(), base_rev, new_rev, "ab")  # before any worktree is made
    config = load_config(config_path, sets)
    limit = cost_threshold
    tpu = (resolve_target(target, config)
           if compile_ and (target or config.topology.target) else None)
    record, path = run_ab(config, repository(), base_rev, new_rev, cache_dir(), rounds=rounds,
                          case_glob=case_globs, out=out, argv=argv, target=tpu,
                          cost_threshold=limit)
    print(render_text(record, path))
    return exit_code(record)


def server_sides(base_rev: str, new_rev: str, server_repo: Path | None,
                 pythons: tuple[Path | None, Path | None]) -> dict:
    """The two sides of a server A/B: revisions of `server_repo`, or two interpreters."""
    from mibench.engines import cache_dir

    from ..case_kinds import server_ab

    servers = server_ab()
    base_python, new_python = pythons
    if server_repo is not None:
        if base_python is not None or new_python is not None:
            raise MibenchError("give --server-repo or --base-python/--new-python, not both",
                               field="--server-repo")
        repo = Path(server_repo)
        if not (repo / ".git").exists():
            raise MibenchError(f"{repo} is not a git checkout", field="--server-repo")
        return {"base": servers.revision_side(repo, base_rev, cache_dir()),
                "new": servers.revision_side(repo, new_rev, cache_dir())}
    if base_python is None or new_python is None:
        missing = "--base-python" if base_python is None else "--new-python"
        raise MibenchError("two installed servers need both --base-python and --new-python",
                           field=missing)
    return {"base": servers.python_side("base", str(base_python)),
            "new": servers.python_side("new", str(new_python))}


def server_ab_command(base_rev: str, new_rev: str, config_path: Path, *, rounds: int,
                      case_globs: list[str] | None, out: Path, sets: list[str],
                      argv: list[str], server_repo: Path | None,
                      pythons: tuple[Path | None, Path | None]) -> int:
    """A/B of two server versions (harness/under_test/ab.py), its verdict printed; the exit
    code."""
    from ..ab.rounds import exit_code
    from ..case_kinds import server_ab
    from ..config import load_config
    from ..report.ab import render_text

    config = load_config(config_path, sets)
    sides = server_sides(base_rev, new_rev, server_repo, pythons)
    writable_folder(out, "--out")
    record, path = server_ab().run_server_ab(config, sides, rounds=rounds, case_globs=case_globs,
                                 out=out, argv=argv)
    print(render_text(record, path))
    return exit_code(record)

"""`mibench bisect GOOD_REV BAD_REV CONFIG --case GLOB`: the first commit on BAD_REV's
first-parent line whose A/B run against GOOD_REV is a regression (harness/ab/bisect.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import Sets, guarded


@guarded
def bisect(good_rev: Annotated[str, typer.Argument(help="A revision without the regression.")],
           bad_rev: Annotated[str, typer.Argument(help="A revision with it.")],
           config: Path,
           case: Annotated[list[str], typer.Option(
               "--case", help="The cases (glob on case ids) that regressed; repeatable: "
                              "the union.")],
           rounds: Annotated[int, typer.Option(help="Rounds of each A/B step.")] = 5,
           max_rounds: Annotated[int | None, typer.Option(
               help="The most rounds one step may take: a step left inconclusive is "
                    "measured again with twice the rounds within it; default 4 x "
                    "--rounds.")] = None,
           server_repo: Annotated[Path | None, typer.Option(
               help="Bisect this server repository's commits (the config's launched http "
                    "cases) instead of mibench's engines.")] = None,
           set_: Sets = None):
    """The first commit on BAD_REV's first-parent line after GOOD_REV whose A/B run against
    GOOD_REV is a regression; prints each step with its evidence. A step that stays
    inconclusive names no commit: exit 2, with what would decide it."""
    raise typer.Exit(bisect_command(good_rev, bad_rev, config, case_globs=case, rounds=rounds,
                                    max_rounds=max_rounds, sets=set_ or [],
                                    server_repo=server_repo))


def bisect_command(good: str, bad: str, config_path: Path, *, case_globs: list[str],
                   rounds: int, sets: list[str], server_repo: Path | None = None,
                   max_rounds: int | None = None) -> int:
    """Bisect, print the first bad commit and the evidence; the exit code: 0 a commit
    named, 2 (a MibenchError) when none can be: nothing to search, or a step left
    inconclusive within --max-rounds."""
    from mibench.engines import cache_dir

    from ..ab.bisect import bisect as find_first_bad
    from ..ab.revisions import repository
    from ..config import load_config
    from ..config.bounds import check_flag

    if rounds < 1:
        raise MibenchError(f"must be at least 1, got {rounds}", field="--rounds")
    check_flag(rounds, "--rounds")  # before any revision is built
    if max_rounds is not None:
        if max_rounds < rounds:
            raise MibenchError(f"must be at least --rounds ({rounds}), got {max_rounds}",
                               field="--max-rounds")
        check_flag(max_rounds, "--max-rounds")
    config = load_config(config_path, sets)
    repo = repository(server_repo) if server_repo is not None else repository()
    found = find_first_bad(config, repo, good, bad, cache_dir(), case_glob=case_globs,
                           rounds=rounds, max_rounds=max_rounds,
                           servers=server_repo is not None)
    if found["verdict"] != "found":
        step = found["undecided"]
        for case_id, line in step["evidence"].items():
            print(f"  {case_id}: {line}")
        raise MibenchError(f"{step['subject']!r} stayed inconclusive against {good} at "
                           f"{step['rounds']} rounds, so no first bad commit is named; "
                           f"{found['decide']}", field=step["commit"][:12])
    print(f"first bad commit: {found['first_bad']} {found['subject']!r} "
          f"({len(found['steps'])} A/B runs over {found['candidates']} commits)")
    for case_id, line in found["evidence"].items():
        print(f"  {case_id}: {line}")
    return 0

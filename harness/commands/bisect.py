"""`mibench bisect GOOD_REV BAD_REV CONFIG --case GLOB`: the commit(s) on BAD_REV's
first-parent line that made the change BAD_REV shows against GOOD_REV, found by the level
each step sits at (harness/ab/bisect.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import Sets, Threshold, guarded, parse_thresholds


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
           threshold: Threshold = None, set_: Sets = None):
    """The commit(s) on BAD_REV's first-parent line after GOOD_REV that made the change
    BAD_REV shows against GOOD_REV, each step judged by the level it sits at (near GOOD,
    near BAD, or between: a partial step); prints each step with its evidence as it goes.
    A step that stays undecided names no commit: exit 2, with what would decide it."""
    limit = parse_thresholds(threshold, ("time",))["time"]
    raise typer.Exit(bisect_command(good_rev, bad_rev, config, case_globs=case, rounds=rounds,
                                    max_rounds=max_rounds, sets=set_ or [],
                                    server_repo=server_repo, threshold=limit))


def bisect_command(good: str, bad: str, config_path: Path, *, case_globs: list[str],
                   rounds: int, sets: list[str], server_repo: Path | None = None,
                   max_rounds: int | None = None, threshold: float = 0.05) -> int:
    """Bisect, print the first bad commit and the evidence; the exit code: 0 a commit
    named, 2 (a MibenchError) when none can be: nothing to search, or a step left
    inconclusive within --max-rounds."""
    from mibench.engines import cache_dir

    from ..ab.bisect import bisect as find_first_bad
    from ..ab.revisions import distinct, repository
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
    repo = repository(server_repo) if server_repo is not None else repository()
    distinct(repo, good, bad, "bisect")  # before any worktree is made
    config = load_config(config_path, sets)
    found = find_first_bad(config, repo, good, bad, cache_dir(), case_glob=case_globs,
                           rounds=rounds, max_rounds=max_rounds,
                           servers=server_repo is not None, threshold=threshold)
    if found["verdict"] != "found":
        step = found["undecided"]
        for case_id, line in step["evidence"].items():
            print(f"  {case_id}: {line}")
        why = found["stopped"] or f"stayed inconclusive at {step['rounds']} rounds"
        raise MibenchError(f"{step['subject']!r} {why} against {good}, so no first bad "
                           f"commit is named; {found['decide']}", field=step["commit"][:12])
    steps = sum(1 for st in found["steps"] if not st.get("same_as"))
    how = found.get("how") or f"{steps} A/B steps over {found['candidates']} commits"
    for k, c in enumerate(found["culprits"]):
        what = "first bad commit" if k == 0 else "also bad"
        part = " (part of the change)" if c["partial"] else ""
        print(f"{what}: {c['commit']} {c['subject']!r}{part} ({how}; "
              + ", ".join(f"{case} {x:+.1%}" for case, x in c["change"].items()) + ")")
    for case_id, line in found["evidence"].items():
        print(f"  {case_id}: {line}")
    return 0

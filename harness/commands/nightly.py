"""`mibench nightly CONFIG --history DIR`: one night of the nightly loop (harness/nightly/:
run at HEAD, judge against the history, confirm with `ab`, bisect, one summary);
`mibench accept DIR --case GLOB --by WHO --why TEXT`: accept a known regression (or a
confirmed improvement) on purpose; `mibench regressions DIR`: the regressions the history
records, with their life cycle. The nightly's exit codes: 0 every case decided and none
failed, or an undecided night; 1 a confirmed or known regression, or what `compare` fails
without timing; 2 bad input or nothing that could be judged; 4 the index could not be
written; 5 the last --max-undecided nights each left a case undecided; 6 another night
holds the history folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from ..case_kinds import kind_of
from .common import (
    CaseGlobs,
    Sets,
    Threshold,
    guarded,
    parse_thresholds,
    writable_folder,
)


@guarded
def nightly(config: Path,
            history: Annotated[Path, typer.Option(
                help="The job's history folder: its index, every run, the A/B runs and "
                     "each night's summary (one folder per job).")],
            repo: Annotated[Path | None, typer.Option(
                help="The git checkout whose HEAD is judged and whose commits ab and bisect "
                     "measure (default: this one); its engines run from cached worktrees, "
                     "not installed.")] = None,
            server_repo: Annotated[Path | None, typer.Option(
                help="Judge this server repository's commits instead (the config's "
                     "launched servers run its checkout; ab and bisect as with "
                     "`ab --server-repo`).")] = None,
            threshold: Threshold = None,
            budget: Annotated[str, typer.Option(
                help="Time for confirming and bisecting after the run (90m, 2h, 600s); "
                     "no A/B starts that would not end within it.")] = "1h",
            rounds: Annotated[int, typer.Option(help="Rounds of each A/B.")] = 5,
            max_rounds: Annotated[int | None, typer.Option(
                help="The most rounds one A/B may take: a case left inconclusive is "
                     "measured again with twice the rounds within it; default 4 x "
                     "--rounds.")] = None,
            max_commits: Annotated[int, typer.Option(
                help="Bisect at most this many commits since the last pass (more: the "
                     "summary gives the bisect command).")] = 32,
            seed_runs: Annotated[int, typer.Option(
                help="Runs of the first night (no baseline yet), to learn the noise.")] = 5,
            reseed: Annotated[bool, typer.Option(
                help="Seed again at HEAD: a new baseline (a new config or machine).")] = False,
            max_undecided: Annotated[int, typer.Option(
                help="Undecided nights in a row (each left a case that neither compare nor "
                     "ab decided) that fail the job with exit 5.")] = 3,
            link_base: Annotated[str, typer.Option(
                help="Prefix of the summary's links (e.g. the CI run's page).")] = "",
            case: CaseGlobs = None, set_: Sets = None):
    """One night: run CONFIG at HEAD, judge it against the history, confirm with ab every
    case compare does not show within the threshold, bisect a confirmed one, print the
    summary (<= 40 lines). Exit 0 every case decided and none failed (or an undecided night:
    the baseline stays); 1 a confirmed or known regression, a failed or missing case, moved
    scores, memory, timed compiles or parity; 2 bad input; 4 the index could not be
    written; 5 --max-undecided undecided nights in a row; 6 another night holds DIR."""
    from mibench.engines import cache_dir

    from ..ab.revisions import repository
    from ..config import load_config
    from ..nightly.loop import NightlyOptions
    from ..nightly.loop import nightly as one_night
    from ..nightly.steps import RealSteps
    from ..util import parse_duration

    limit = parse_thresholds(threshold, ("time",))["time"]
    folder = checked_options(history, rounds, max_rounds, max_commits, seed_runs)
    if max_undecided < 1:
        raise MibenchError(f"must be at least 1, got {max_undecided}", field="--max-undecided")
    if repo is not None and server_repo is not None:
        raise MibenchError("give --repo or --server-repo, not both", field="--server-repo")
    loaded = load_config(config, set_ or [])
    too_few = [c.case_id for c in _cases(loaded, case)
               if c.runs.timed < 3 and kind_of(c.engine).timed_interval]
    if too_few:  # an http case is one load (one timed run): `ab` judges its timing
        raise MibenchError(f"the nightly needs 3 or more timed runs a case for an interval; "
                           f"{too_few[0]} has fewer", field="runs.timed")
    steps = RealSteps(config=loaded, config_path=str(config),
                      repo=repository(server_repo or repo), cache=cache_dir(),
                      server=server_repo is not None, sets=tuple(set_ or []),
                      cases=tuple(case or []), threshold=limit)
    result = one_night(NightlyOptions(
        history=folder, config=loaded.name, target="server" if server_repo else "engines",
        threshold=limit, rounds=rounds, max_rounds=max_rounds, max_commits=max_commits,
        budget_s=parse_duration(budget), seed_runs=seed_runs, reseed=reseed,
        max_undecided=max_undecided, link_base=link_base), steps)
    print(result.markdown, end="")
    raise typer.Exit(result.exit_code)


def _cases(config, globs):
    from ..config.matrix import expand, select_cases

    return select_cases(expand(config), globs)


def checked_options(history: Path, rounds: int, max_rounds: int | None, max_commits: int,
                    seed_runs: int) -> Path:
    """The history folder (made, writable), after checking the counts; a MibenchError
    naming the flag."""
    from ..config.bounds import check_flag

    for flag, value, least in (("--rounds", rounds, 3), ("--max-commits", max_commits, 1),
                               ("--seed-runs", seed_runs, 2)):
        if value < least:
            raise MibenchError(f"must be at least {least}, got {value}", field=flag)
    if max_rounds is not None and max_rounds < rounds:
        raise MibenchError(f"must be at least --rounds ({rounds}), got {max_rounds}",
                           field="--max-rounds")
    check_flag(rounds, "--rounds")
    check_flag(seed_runs, "--seed-runs")
    if max_rounds is not None:
        check_flag(max_rounds, "--max-rounds")
    return writable_folder(history, "--history")


@guarded
def accept(history: Annotated[Path, typer.Argument(help="The nightly's history folder.")],
           case: Annotated[list[str], typer.Option(
               "--case", help="The cases (glob on case ids) whose known regression (or "
                              "confirmed improvement) is accepted; repeatable.")],
           by: Annotated[str, typer.Option(help="Who accepts it.")],
           why: Annotated[str, typer.Option(help="Why it is intended.")]):
    """Accept the known regressions (or confirmed improvements) of the matching cases on
    purpose (who and why go into the history's index); the night that confirmed them
    becomes the baseline. Safe while a night runs: the night keeps it."""
    from ..nightly.index import Folder
    from ..nightly.index import accept as accept_known

    for k in accept_known(Folder(Path(history)), case, by, why):
        culprit = f"culprit {k.culprit[:12]}" if k.culprit else (
            "an improvement" if k.kind == "improvement" else "no culprit named")
        change = f", {k.change:+.1%}" if k.change is not None else ""
        print(f"accepted {k.case_id} ({culprit}{change}) by {by}: {why}")


@guarded
def regressions(history: Annotated[Path, typer.Argument(help="The nightly's history folder.")],
                format_: Annotated[str, typer.Option(
                    "--format", help="text, or json (mibench.regressions/1).")] = "text",
                status: Annotated[list[str] | None, typer.Option(
                    help="Only these statuses (suspected, confirmed, disproved, accepted, "
                         "fixed); repeatable.")] = None):
    """The regressions the history records, newest first, each with its life cycle:
    suspected, confirmed (culprit, change, interval, the command that reproduces it),
    disproved, accepted (who, why, when), fixed; confirmed improvements too."""
    from ..nightly.regressions import listing

    print(listing(Path(history), format_, status or []), end="")

"""`mibench compare [BASE NEW]`: the regression verdict of NEW against BASE over comparable
cases (timings, scores, own peak memory, compiles during timed runs; compile artifacts:
compiled cost); exit 0 no regression, 1 a regression or untested cases, 2 nothing
comparable or bad input. BASE and NEW are files, or git revisions whose runs are looked up
in `--dir`; without them, the newest two comparable runs there (harness/judge/pick.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError, did_you_mean

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


@guarded
def compare(base: Annotated[str | None, typer.Argument(
                help="Baseline artifact, or a git revision whose newest run in --dir is "
                     "taken (default: the older of the newest two comparable runs in "
                     "--dir).")] = None,
            new: Annotated[str | None, typer.Argument(
                help="New artifact, or a git revision (default: the newest run in --dir "
                     "with a comparable run before it).")] = None,
            folder: Annotated[Path, typer.Option(
                "--dir", help="The artifacts folder where runs are looked up when BASE and "
                              "NEW are not files (the default of `run --out`).")]
            = Path("artifacts"),
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
    from ..judge.compare import compare as compare_records
    from ..records import COMPILE_SCHEMAS as COMPILE
    from ..report.renderers import RENDERERS

    limits = parse_thresholds(threshold, ("time", "memory", "cost"),
                              memory=memory_threshold, cost=cost_threshold)
    limit, memory, kind = limits["time"], limits["memory"], parse_format(format)
    base, new = pick_artifacts(base, new, folder, case)
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
    print(RENDERERS.lookup("compare-json" if kind == "json" else "compare")(result, note),
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
    what it used (harness.judge.noise); other kinds of artifact there are skipped, one
    line each on stderr."""
    from ..stats.significance import NoiseFloor

    if text is not None and folder is not None:
        raise MibenchError("give --noise-floor or --noise-from, not both", field="--noise-floor")
    if text is not None:
        return NoiseFloor(parse_threshold(text, "--noise-floor"), "--noise-floor")
    if folder is not None:
        from ..judge.history import load_dir
        from ..judge.noise import aa_noise

        found = load_dir(folder, load)
        for line in found.skipped:
            print(line, file=sys.stderr)
        return aa_noise(found.records, str(folder), leave_out=judged)
    return None


def compare_compile(base: Path, new: Path, limit: float, kind: str,
                    case: list[str] | None = None) -> int:
    """`compare` on two compile artifacts: exact costs, a threshold gate; the exit code."""
    from ..judge.compile_compare import compare_compile as compare_costs
    from ..records import COMPILE_SCHEMAS as COMPILE
    from ..records import read_compile_artifact
    from ..report.renderers import RENDERERS

    if not (schema_of(base) in COMPILE and schema_of(new) in COMPILE):
        odd = new if schema_of(base) in COMPILE else base
        raise MibenchError("is not a compile artifact; compare a compile artifact with "
                           "another", field=str(odd))
    old, fresh = select_records([read_compile_artifact(base), read_compile_artifact(new)], case)
    result = compare_costs(old, fresh, limit)
    print(RENDERERS.lookup("compile-compare-json" if kind == "json" else "compile-compare")(
        result), end="")
    return result.exit_code



def pick_artifacts(base: str | None, new: str | None, folder: Path,
                   case: list[str] | None = None) -> tuple[Path, Path]:
    """The two files to compare: BASE and NEW when both are files (as they are); else the
    runs of `folder` they name as git revisions, or without them the newest two comparable
    runs there; the choice said on stderr."""
    if base is not None and new is not None and _named(base) and _named(new):
        return Path(base), Path(new)
    if (base is None) != (new is None):
        raise MibenchError("give BASE and NEW, or neither (the newest two comparable runs "
                           f"in {folder})", field="NEW" if new is None else "BASE")
    runs, empty = folder_runs(folder, case)
    if base is None:
        return newest_two(runs, folder, empty)
    sides = {"base": side(base, runs, folder, empty), "new": side(new, runs, folder, empty)}
    chosen = dict(zip(sides, _choose(sides["base"][0], sides["new"][0]), strict=True))
    for name, (mine, what) in sides.items():
        run = chosen[name]
        if what and len(mine) > 1:
            k = mine.index(run)
            what += f", the newest of its {len(mine)} runs" + (
                "" if k == 0 else " that is comparable with the other side")
        print(f"{name}: {run.describe()}" + (f"; {what}" if what else ""), file=sys.stderr)
    return chosen["base"].path, chosen["new"].path


def _choose(bases, news):
    from ..judge.pick import choose

    base, new = choose(bases, news)
    if base.record.run_id == new.record.run_id:
        raise MibenchError("both sides are the one run of this commit, so nothing would be "
                           "compared; run it again, or give another revision",
                           field=str(new.path))
    return base, new


def folder_runs(folder: Path, case: list[str] | None):
    """(runs, why none): the comparable runs of `folder` (oldest first), their cases
    selected by `--case`; `why none` says what the folder holds when it holds no run."""
    from ..judge.history import load_dir
    from ..judge.pick import runs_of

    if not folder.is_dir():
        return [], "no such folder (where `mibench run` writes by default; give --dir DIR)"
    try:
        found = load_dir(folder, load)
    except MibenchError as e:
        if e.field != str(folder):
            raise  # a damaged artifact: the reader's error, naming it
        return [], e.message
    return runs_of(select_records(found.records, case), found.paths), None


def newest_two(runs, folder: Path, empty: str | None) -> tuple[Path, Path]:
    """The newest two comparable runs of `folder`, said on stderr."""
    from ..judge.pick import newest_pair

    pair = newest_pair(runs)
    if pair is None:
        if empty:
            found = empty
        elif len(runs) == 1:
            found = f"holds one run, {runs[0].describe()}"
        else:
            names = sorted({str(r.record.config.get("name", "?")) for r in runs})
            found = (f"holds {len(runs)} runs (config {', '.join(names)}), but no two have a "
                     "case that is the same measurement; give BASE NEW to see what differs")
        raise MibenchError(f"{found}; `compare` with no BASE NEW compares the newest two "
                           "comparable runs there", field=str(folder))
    base, new, passed = pair
    print(f"comparing the newest two comparable runs in {folder}:", file=sys.stderr)
    print(f"  base: {base.describe()}", file=sys.stderr)
    print(f"  new:  {new.describe()}", file=sys.stderr)
    if passed:
        print(f"  ({len(passed)} newer run(s) have no comparable run before them: "
              f"{', '.join(str(r.path) for r in passed[:3])})", file=sys.stderr)
    return base.path, new.path


def side(arg: str, runs, folder: Path, empty: str | None):
    """(runs, what): the file `arg` names (read as compare reads it), else the runs of the
    git revision it names, newest first, with a note saying which commit; else an error
    with the file, branch and tag names closest to it."""
    from mibench.files import nearby

    from ..ab.revisions import commit_of, refs, repository
    from ..judge.pick import Run, nearest_commits, of_commit

    if _named(arg):
        return [Run(Path(arg), load_checked(Path(arg)), "")], ""
    try:
        repo = repository()
    except MibenchError:
        repo = None
    commit = commit_of(repo, arg) if repo is not None else None
    if commit is None:
        files = sorted(folder.rglob("*.json")) if folder.is_dir() else []
        names = [str(f) for f in files] + [f.name for f in files]
        where = f"a git revision of {repo}" if repo else "a git revision (no repository here)"
        hint = nearby(arg) if "/" in arg or arg.endswith(".json") else ""  # its siblings
        hint = hint or did_you_mean(arg, names + (refs(repo) if repo else []))
        raise MibenchError(f"no such artifact, nor {where}{hint}", field=arg)
    mine = of_commit(runs, commit)
    if not mine:
        near = ", ".join(f"{c} ({n} run{'s' if n > 1 else ''})"
                         for c, n in nearest_commits(runs, repo, commit))
        held = f"commits with runs, nearest first: {near}" if near else empty or "no runs"
        raise MibenchError(f"is commit {commit[:8]}, which has no run in {folder} ({held}); "
                           f"run it with `mibench run CONFIG` at that commit", field=arg)
    return mine, f"{arg} is commit {commit[:8]}"


def _named(arg: str) -> bool:
    """`arg` names something in the file system (a broken or looping link too: the reader
    says what is wrong with it)."""
    return os.path.lexists(arg)

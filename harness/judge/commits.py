"""The order of runs by the commit they measured (harness.judge.comparable.code_git): by
commit time from git in the recorded checkout, else in the current folder; the run's
`started_at` where git knows neither; commits made within the same second by how many
commits lead to them; then by start.

git is asked a fixed number of times per checkout, not per commit (a folder of a year of
nights holds hundreds of commits, and a process per commit cost seconds): one
`git cat-file --batch-check` resolves every commit, one `git log --no-walk` gives their
times, and `git rev-list --count` runs only for commits whose time ties another's. Never
cached across calls: a long-lived process must see history rewritten.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

from ..records import RunRecord
from ..util import git_output, parse_time
from .comparable import code_git

Where = tuple[str, str]  # (checkout path, commit) as recorded


def commit_time(record: RunRecord) -> str | None:
    """ISO commit time from git, trying the recorded checkout then the current folder."""
    git = code_git(record)
    return _git(git.path, "show", "-s", "--format=%cI", git.commit) if git.commit else None


def commit_depth(record: RunRecord) -> int:
    """How many commits lead to the recorded one (-1 where unknown): orders commits made
    within the same second, which their times cannot."""
    git = code_git(record)
    return _depth((git.path, git.commit)) if git.commit else -1


def _depth(where: Where) -> int:
    depth = _git(where[0], "rev-list", "--count", where[1])
    return int(depth) if depth and depth.isdigit() else -1


def _git(path: str, *args: str) -> str | None:
    """Non-empty output of a git command in the recorded checkout, else in the current
    folder."""
    outputs = (git_output(where, *args) for where in dict.fromkeys([path, "."]))
    return next((out for out in outputs if out), None)


def commit_times(wanted: set[Where]) -> dict[Where, str]:
    """ISO commit time (git's `%cI`) of each recorded commit git knows, in its checkout
    or else in the current folder; two git calls per checkout asked."""
    found: dict[Where, str] = {}
    by_path: dict[str, set[str]] = defaultdict(set)
    for path, commit in wanted:
        by_path[path].add(commit)
    for path, commits in sorted(by_path.items()):
        for where in dict.fromkeys([path, "."]):
            left = sorted(c for c in commits if (path, c) not in found)
            found |= {(path, c): t for c, t in _times(where, left).items()}
    return found


def _times(where: str, commits: list[str]) -> dict[str, str]:
    """commit -> `%cI` of the commits `git -C where` knows."""
    names = [c for c in commits if c.split() == [c]]  # one name a line, none empty
    if not names:
        return {}
    check = git_output(where, "cat-file", "--batch-check", stdin="\n".join(names) + "\n")
    if check is None:
        return {}
    full = {}  # name -> the commit's full sha
    for name, line in zip(names, check.splitlines(), strict=False):
        sha, kind, *_ = line.split() + ["", ""]
        if kind == "commit":
            full[name] = sha
    if not full:
        return {}
    log = git_output(where, "log", "--no-walk=unsorted", "--stdin", "--format=%H %cI",
                     stdin="\n".join(dict.fromkeys(full.values())) + "\n")
    times = dict(line.split(" ", 1) for line in (log or "").splitlines() if " " in line)
    return {name: times[sha] for name, sha in full.items() if times.get(sha)}


def ordered(records: list[RunRecord]) -> list[tuple[str, RunRecord]]:
    """(time, record) by commit time (started_at where unknown), then by commit depth,
    then by start."""
    def where(r: RunRecord) -> Where:
        return code_git(r).path, code_git(r).commit

    times = commit_times({where(r) for r in records if code_git(r).commit})
    timed = [(times.get(where(r)) or r.started_at, r) for r in records]
    # the depth orders only commits whose times tie (a run of no known commit: -1)
    ties: dict[str, set[Where | None]] = defaultdict(set)
    for time, r in timed:
        ties[_sortable(time)].add(where(r) if where(r) in times else None)
    depth = {w: _depth(w) for tied in ties.values() if len(tied) > 1 for w in tied if w}
    return sorted(timed, key=lambda tr: (_sortable(tr[0]), depth.get(where(tr[1]), -1),
                                         _sortable(tr[1].started_at)))


def _sortable(iso: str) -> str:
    """ISO times with offsets compare as UTC strings (`Z` and `+00:00` alike)."""
    t = parse_time(iso)
    return iso if t is None else t.astimezone(dt.UTC).isoformat()

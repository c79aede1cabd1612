"""Which run artifacts `mibench compare` compares when it is not given two files: the newest
two comparable runs of a folder (pytest-benchmark's compare-with-last), or the newest run of
a commit comparable with the other side (asv's `compare REV REV`).

"Newest" is the order of `history` (harness.judge.commits `ordered`: by the commit the run
measured, then by the run's start), so the run of a later commit is the new side even when
an older commit was run after it, and runs of one commit (a dirty tree, a rerun) go by their
start. "Comparable" is `compare`'s own notion: a case that is the same measurement in both
(harness.judge.comparable `same_measurements`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..records import RunRecord
from ..util import parse_time
from .commits import commit_times, ordered
from .comparable import code_git, invalid, label, same_measurements


@dataclasses.dataclass(frozen=True)
class Run:
    """A run artifact, where it was read from, and its place in the order (`time`: its
    commit's time, else its start)."""

    path: Path
    record: RunRecord
    time: str

    @property
    def commit(self) -> str | None:
        return code_git(self.record).commit

    def describe(self) -> str:
        """`artifacts/a.json (commit 1a2b3c4d, started 2026-02-13T03:00:00Z)`."""
        return f"{self.path} (commit {label(self.record)}, started {self.record.started_at})"


def runs_of(records: list[RunRecord], paths: list[Path]) -> list[Run]:
    """The runs that can be compared (they have cases), oldest first."""
    where = {id(r): p for r, p in zip(records, paths, strict=True)}
    return [Run(where[id(r)], r, time) for time, r in ordered(records) if invalid(r) is None]


def comparable(base: Run, new: Run) -> bool:
    return base.record.run_id != new.record.run_id and bool(
        same_measurements(base.record, new.record))


def newest_pair(runs: list[Run]) -> tuple[Run, Run, list[Run]] | None:
    """(base, new, passed over) of the runs (oldest first): `new` the newest run with a
    comparable run before it, `base` the newest such; `passed over` the newer runs that
    have none. None when no two runs are comparable."""
    for i in range(len(runs) - 1, 0, -1):
        base = next((b for b in reversed(runs[:i]) if comparable(b, runs[i])), None)
        if base is not None:
            return base, runs[i], runs[i + 1:]
    return None


def same_commit(recorded: str | None, commit: str) -> bool:
    """A recorded commit (full or abbreviated, 7 characters or more) is `commit`."""
    return bool(recorded) and len(recorded) >= 7 and commit.startswith(recorded)


def of_commit(runs: list[Run], commit: str) -> list[Run]:
    """The runs that measured `commit`, newest first."""
    return [r for r in reversed(runs) if same_commit(r.commit, commit)]


def choose(bases: list[Run], news: list[Run]) -> tuple[Run, Run]:
    """The newest of `news` with a comparable run among `bases`, and the newest such (both
    lists newest first); else the newest of each (`compare` then says why nothing is
    comparable) or, when that is one run, the next one."""
    for new in news:
        base = next((b for b in bases if comparable(b, new)), None)
        if base is not None:
            return base, new
    other = [b for b in bases if b.record.run_id != news[0].record.run_id]
    return (other or bases)[0], news[0]


def nearest_commits(runs: list[Run], repo: Path, commit: str, n: int = 5
                    ) -> list[tuple[str, int]]:
    """(short commit, runs of it) of the `n` commits with runs nearest in time to
    `commit` (git's commit time in `repo`; the newest commits where it has none)."""
    counts: dict[str, int] = {}
    times: dict[str, str] = {}
    for r in runs:
        if r.commit:
            counts[r.commit] = counts.get(r.commit, 0) + 1
            times[r.commit] = r.time
    when = commit_times({(str(repo), commit)}).get((str(repo), commit))
    if when is None:
        order = sorted(counts, key=lambda c: _seconds(times[c]), reverse=True)
    else:
        order = sorted(counts, key=lambda c: abs(_seconds(times[c]) - _seconds(when)))
    return [(c[:8], counts[c]) for c in order[:n]]


def _seconds(iso: str) -> float:
    t = parse_time(iso)
    return 0.0 if t is None else t.timestamp()

"""`mibench history`: artifacts of one folder ordered by commit time; per case the series of
median throughputs, its change points (`harness.changepoint`), and the peak vs the current;
beside them the case's own peak memory (harness.stats.memory), the current against the
lowest of its kind (+ = larger).

Commit time comes from `git show` in the recorded checkout (or the current one) when the
commit is known there; otherwise the artifact's `started_at` stands in for it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from mibench.errors import MibenchError
from mibench.harness.records import RunRecord, read_artifact
from mibench.harness.stats.changepoint import (
    DEFAULT,
    METHOD,
    ChangePoint,
    Params,
    binary_segmentation,
)
from mibench.harness.stats.comparable import label, measurement
from mibench.harness.stats.describe import median
from mibench.harness.stats.memory import own
from mibench.harness.stats.significance import NoiseFloor
from mibench.harness.util import git_output

AA_CONFIDENCE = 0.90  # the learnt floor is this one-sided upper confidence limit


@dataclasses.dataclass(frozen=True)
class Point:
    """One artifact's value for one case."""

    label: str  # short commit
    commit: str | None
    time: str  # commit time, else the run's start
    run_id: str
    status: str  # ok / failed / skipped / missing
    items_per_s: float | None
    items_per_s_min: float | None = None  # the slowest and fastest timed run
    items_per_s_max: float | None = None
    peak_memory_bytes: int | None = None  # the case's peak memory and its kind (records/run)
    peak_memory_source: str | None = None

    @property
    def own_peak(self) -> bool:
        """A case's own peak memory (trended; a bound or an older artifact's rss is not)."""
        return own(self.peak_memory_bytes, self.peak_memory_source)


@dataclasses.dataclass(frozen=True)
class Series:
    config: str  # the config's name
    case_id: str
    points: list[Point]
    change_points: list[ChangePoint]  # index: into `points`

    @property
    def peak(self) -> Point | None:
        ok = [p for p in self.points if p.items_per_s is not None]
        return max(ok, key=lambda p: p.items_per_s, default=None)

    @property
    def current(self) -> Point:
        return self.points[-1]

    @property
    def lowest_memory(self) -> Point | None:
        """The smallest own peak memory of the current point's kind (None: the current
        point has no own peak)."""
        kind = self.current.peak_memory_source
        same = [p for p in self.points if p.own_peak and p.peak_memory_source == kind]
        return min(same, key=lambda p: p.peak_memory_bytes) if self.current.own_peak else None

    @property
    def memory_change(self) -> float | None:
        """The current own peak memory over the lowest of its kind, - 1 (+ = larger)."""
        low = self.lowest_memory
        return self.current.peak_memory_bytes / low.peak_memory_bytes - 1 if low else None

    @property
    def name(self) -> str:
        return f"{self.config}: {self.case_id}"


@dataclasses.dataclass(frozen=True)
class History:
    series: list[Series]
    artifacts: int
    configs: list[str]
    method: str = METHOD
    params: Params = DEFAULT


def load_dir(folder: str | Path, load=read_artifact) -> list[RunRecord]:
    """Every `*.json` artifact under `folder` (recursively), read with `load`; a file that is
    not a mibench artifact is an error naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MibenchError("not a folder of artifacts", field=str(folder))
    files = sorted(folder.rglob("*.json"))
    if not files:
        raise MibenchError("no *.json artifacts in this folder", field=str(folder))
    return [load(f) for f in files if f.is_file()]


def commit_time(record: RunRecord) -> str | None:
    """ISO commit time from git, trying the recorded checkout then the current folder."""
    git = record.provenance.git
    return _git(git.path, "show", "-s", "--format=%cI", git.commit) if git.commit else None


def commit_depth(record: RunRecord) -> int:
    """How many commits lead to the recorded one (-1 where unknown): orders commits made
    within the same second, which their times cannot."""
    git = record.provenance.git
    depth = _git(git.path, "rev-list", "--count", git.commit) if git.commit else None
    return int(depth) if depth and depth.isdigit() else -1


def _git(path: str, *args: str) -> str | None:
    """Non-empty output of a git command in the recorded checkout, else in the current
    folder."""
    outputs = (git_output(where, *args) for where in dict.fromkeys([path, "."]))
    return next((out for out in outputs if out), None)


def ordered(records: list[RunRecord]) -> list[tuple[str, RunRecord]]:
    """(time, record) by commit time (started_at where unknown), then by commit depth,
    then by start."""
    known: dict[tuple, tuple[str | None, int]] = {}  # git asked once per commit, this call

    def commit(r: RunRecord) -> tuple[str | None, int]:
        where = (r.provenance.git.path, r.provenance.git.commit)
        if where not in known:
            known[where] = (commit_time(r), commit_depth(r))
        return known[where]

    timed = [(commit(r)[0] or r.started_at, r) for r in records]
    return sorted(timed, key=lambda tr: (_sortable(tr[0]), commit(tr[1])[1],
                                         _sortable(tr[1].started_at)))


def _sortable(iso: str) -> str:
    """ISO times with offsets compare as UTC strings (`Z` and `+00:00` alike)."""
    import datetime as dt

    try:
        return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(
            dt.UTC).isoformat()
    except ValueError:
        return iso


def build_history(records: list[RunRecord], case: list[str] | str | None = None,
                  params: Params = DEFAULT) -> History:
    """The series of every case (or only those whose id matches one of the globs `case`)
    of every config, in commit order. Cases of different configs are different series
    even when their ids agree."""
    globs = [case] if isinstance(case, str) else list(case or [])
    configs: dict[str, list[tuple[str, RunRecord]]] = {}
    for time, r in ordered(records):
        configs.setdefault(str(r.config.get("name", "?")), []).append((time, r))
    series, known = [], []
    for name, timeline in configs.items():
        ids: list[str] = []
        for _, r in timeline:
            ids += [c.case_id for c in r.cases if c.case_id not in ids]
        known += ids
        series += [_series(name, cid, timeline, params) for cid in ids
                   if not globs or any(fnmatch.fnmatchcase(cid, g) for g in globs)]
    for glob in globs:
        if not any(fnmatch.fnmatchcase(cid, glob) for cid in known):
            shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            raise MibenchError(f"{glob!r} matches no case of these artifacts (known: "
                               f"{shown})", field="--case")
    return History(series=series, artifacts=len(records), params=params,
                   configs=list(configs))


def _series(config: str, case_id: str, timeline: list[tuple[str, RunRecord]],
            params: Params) -> Series:
    points = []
    for time, r in timeline:
        c = next((c for c in r.cases if c.case_id == case_id), None)
        thr = c.metrics.throughput_items_per_s if c is not None and c.status == "ok" else None
        points.append(Point(label=label(r), commit=r.provenance.git.commit, time=time,
                            run_id=r.run_id, status=c.status if c else "missing",
                            items_per_s=median(thr),
                            items_per_s_min=thr.min if thr is not None else None,
                            items_per_s_max=thr.max if thr is not None else None,
                            peak_memory_bytes=c.metrics.peak_memory_bytes if c else None,
                            peak_memory_source=c.metrics.peak_memory_source if c else None))
    where = [i for i, p in enumerate(points) if p.items_per_s is not None]
    found = binary_segmentation([points[i].items_per_s for i in where], params)
    moved = [dataclasses.replace(cp, index=where[cp.index]) for cp in found]
    return Series(config=config, case_id=case_id, points=points, change_points=moved)


def aa_noise(records: list[RunRecord], where: str) -> NoiseFloor:
    """The between-run noise floor learnt from A/A runs: artifacts of one commit that
    measured the same case as the same measurement (dirty checkouts too: what they changed
    can only widen the spread, never narrow it)
    (harness.stats.comparable.measurement). Each artifact's median run time of a case is one
    value; s2 = the sum of squared deviations of their logs from their group's mean over
    df = the sum of (group size - 1); the floor is exp(s) - 1 with s the 90% upper
    confidence limit of the standard deviation, sqrt(s2 df / chi2_0.10(df)), so a few A/A
    runs give a wide floor and many a tight one."""
    from scipy.stats import chi2

    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        git = r.provenance.git
        if not git.commit:
            continue
        for c in r.cases:
            if c.status == "ok" and c.timed_s and all(t > 0 for t in c.timed_s):
                key = (git.commit, c.case_id, json.dumps(measurement(r, c), sort_keys=True,
                                                         default=str))
                groups[key].append(math.log(statistics.median(c.timed_s)))
    used = [g for g in groups.values() if len(g) > 1]
    df = sum(len(g) - 1 for g in used)
    if not df:
        raise MibenchError("holds no A/A runs: two or more artifacts of one commit measuring "
                           "the same case", field=f"--noise-from {where}")
    ss = sum(sum((x - statistics.fmean(g)) ** 2 for x in g) for g in used)
    sd = math.sqrt(ss / chi2.ppf(1 - AA_CONFIDENCE, df))
    runs = sum(len(g) for g in used)
    return NoiseFloor(math.expm1(sd), f"learnt from A/A runs in {where}: {runs} case runs in "
                                      f"{len(used)} groups, {df} degrees of freedom, "
                                      f"{AA_CONFIDENCE:.0%} upper limit")

"""`mibench history`: artifacts of one folder ordered by commit time; per measurement the
series of median throughputs, its steps (change points and suspected steps, with their
verdicts: harness.stats.steps), and the peak vs the current; beside them the case's own
peak memory (harness.stats.memory), the current against the lowest of its kind (+ =
larger).

**Like with like.** A series is one measurement in `compare`'s sense (case id, workload,
model, dtype, topology, hardware: harness.stats.comparable): runs of one case id that are
not the same measurement are separate series, labelled by the fields that differ. Within a
config, an artifact without the case is a gap in its series (`missing`), never a zero.
Artifacts of other kinds in the folder (`ab`, `compile`, ...) are skipped, one line each
(`Folder.skipped`).

**Noise.** The floor of the step test is learnt from the folder's repeated runs of one
commit (harness.stats.noise: leaving out the step's two artifacts and runs on a busy
machine), else the platform's default; `History.noise` says which.

Commit time comes from `git show` in the recorded checkout (or the current one) when the
commit is known there; otherwise the artifact's `started_at` stands in for it.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
from pathlib import Path

from mibench.errors import MibenchError

from ..records import CaseRecord, RunRecord, read_artifact
from ..util import git_output
from .changepoint import DEFAULT, METHOD, Params
from .comparable import code_git, differences, label, measurement
from .describe import items_of, median, process_runs
from .load import BUSY_LEVEL, busy, share
from .memory import own
from .noise import aa_noise, floor_for
from .steps import Step, judge_steps

RUN_KINDS = ("mibench.run/1", "mibench.run/2", "mibench.run/3")

__all__ = ["Folder", "History", "Point", "Series", "aa_noise", "build_history", "load_dir"]


@dataclasses.dataclass(frozen=True)
class Point:
    """One artifact's value for one measurement."""

    label: str  # short commit
    commit: str | None
    time: str  # commit time, else the run's start
    run_id: str
    status: str  # ok / failed / skipped / missing (not in this artifact: a gap)
    items_per_s: float | None
    items_per_s_min: float | None = None  # the slowest and fastest timed run
    items_per_s_max: float | None = None
    peak_memory_bytes: int | None = None  # the case's peak memory and its kind (records/run)
    peak_memory_source: str | None = None
    other_load: float | None = None  # other processes' share of the CPU (None: unrecorded)
    # seconds per item of each timed run, by worker process (the step test's samples)
    runs: tuple[tuple[float, ...], ...] = ()

    @property
    def own_peak(self) -> bool:
        """A case's own peak memory (trended; a bound or an older artifact's rss is not)."""
        return own(self.peak_memory_bytes, self.peak_memory_source)

    def busy(self, level: float = BUSY_LEVEL) -> bool:
        return busy(self.other_load, level)


@dataclasses.dataclass(frozen=True)
class Series:
    config: str  # the config's name
    case_id: str
    label: str  # what tells it from the other series of its case id ("": the only one)
    identity: dict  # the measurement (harness.stats.comparable.measurement)
    points: list[Point]
    steps: list[Step]  # change points and suspected steps; index: into `points`

    @property
    def change_points(self) -> list[Step]:
        return [s for s in self.steps if s.kind == "change point"]

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
        return f"{self.config}: {self.case_id}" + (f" [{self.label}]" if self.label else "")


@dataclasses.dataclass(frozen=True)
class History:
    series: list[Series]
    artifacts: int
    configs: list[str]
    noise: str = ""  # where the step test's noise floor comes from
    floor: float | None = None  # that floor (the folder's, leaving nothing out)
    skipped: list[str] = dataclasses.field(default_factory=list)  # other kinds, one line each
    busy_level: float = BUSY_LEVEL
    method: str = METHOD
    params: Params = DEFAULT


@dataclasses.dataclass(frozen=True)
class Folder:
    """The run artifacts of a folder, and a line for each file of another kind skipped."""

    records: list[RunRecord]
    skipped: list[str]


def load_dir(folder: str | Path, load=read_artifact) -> Folder:
    """Every `*.json` run artifact under `folder` (recursively), read with `load`; a mibench
    artifact of another kind (`ab`, `compile`, a command's JSON output) is skipped with a
    line; any other file is an error naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MibenchError("not a folder of artifacts", field=str(folder))
    files = sorted(f for f in folder.rglob("*.json") if f.is_file())
    if not files:
        raise MibenchError("no *.json artifacts in this folder", field=str(folder))
    records, skipped = [], []
    for f in files:
        kind = _schema(f)
        if isinstance(kind, str) and kind.startswith("mibench.") and kind not in RUN_KINDS:
            skipped.append(f"skipped {f}: a {kind} file, not a run artifact")
        else:
            records.append(load(f))
    if not records:
        raise MibenchError(f"holds no run artifacts ({len(skipped)} of other kinds skipped)",
                           field=str(folder))
    return Folder(records, skipped)


def _schema(path: Path):
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None  # the reader says what is wrong with it
    return data.get("schema") if isinstance(data, dict) else None


def commit_time(record: RunRecord) -> str | None:
    """ISO commit time from git, trying the recorded checkout then the current folder."""
    git = code_git(record)
    return _git(git.path, "show", "-s", "--format=%cI", git.commit) if git.commit else None


def commit_depth(record: RunRecord) -> int:
    """How many commits lead to the recorded one (-1 where unknown): orders commits made
    within the same second, which their times cannot."""
    git = code_git(record)
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
        where = (code_git(r).path, code_git(r).commit)
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
                  params: Params = DEFAULT, skipped: list[str] | None = None,
                  where: str = "this folder") -> History:
    """The series of every measurement (or only of the case ids that match one of the
    globs `case`) of every config, in commit order. Cases of different configs are
    different series even when their ids agree; so are cases of one id that are not the
    same measurement."""
    globs = [case] if isinstance(case, str) else list(case or [])
    configs: dict[str, list[tuple[str, RunRecord]]] = {}
    for time, r in ordered(records):
        configs.setdefault(str(r.config.get("name", "?")), []).append((time, r))
    platform = records[0].provenance.devices.platform if records else None

    def floor_of(leave_out: frozenset[str]):
        return floor_for(records, where, leave_out, platform)

    series, known = [], []
    for name, timeline in configs.items():
        ids: list[str] = []
        for _, r in timeline:
            ids += [c.case_id for c in r.cases if c.case_id not in ids]
        known += ids
        for cid in ids:
            if not globs or any(fnmatch.fnmatchcase(cid, g) for g in globs):
                series += _series_of(name, cid, timeline, params, floor_of)
    for glob in globs:
        if not any(fnmatch.fnmatchcase(cid, glob) for cid in known):
            shown = ", ".join(known[:5]) + (", ..." if len(known) > 5 else "")
            raise MibenchError(f"{glob!r} matches no case of these artifacts (known: "
                               f"{shown})", field="--case")
    floor = floor_of(frozenset())
    return History(series=series, artifacts=len(records), params=params,
                   configs=list(configs), noise=floor.source, floor=floor.value,
                   skipped=list(skipped or []))


def _identities(case_id: str, timeline: list[tuple[str, RunRecord]]) -> list[dict]:
    """The distinct measurements of `case_id` in the timeline, in order of appearance (one
    measurement per group of cases with no `differences`)."""
    found: list[dict] = []
    for _, r in timeline:
        for c in r.cases:
            if c.case_id == case_id:
                m = measurement(r, c)
                if not any(not differences(f, m) for f in found):
                    found.append(m)
    return found


def _labels(identities: list[dict]) -> list[str]:
    """Per measurement, the fields that tell it from the others (`` for a single one)."""
    if len(identities) < 2:
        return [""]
    keys = [k for k in dict.fromkeys(k for m in identities for k in m)
            if len({json.dumps(m.get(k), sort_keys=True, default=str) for m in identities}) > 1]
    return [", ".join(f"{k}={json.dumps(m.get(k), default=str)}" for k in keys)
            for m in identities]


def _series_of(config: str, case_id: str, timeline: list[tuple[str, RunRecord]],
               params: Params, floor_of) -> list[Series]:
    """One series per measurement of `case_id`: its own points, and a gap (`missing`)
    for each artifact of the config without the case."""
    identities = _identities(case_id, timeline)
    out = []
    for identity, text in zip(identities, _labels(identities), strict=True):
        points = []
        for time, r in timeline:
            c = next((c for c in r.cases if c.case_id == case_id), None)
            if c is not None and differences(identity, measurement(r, c)):
                continue  # the case of another series
            points.append(_point(time, r, c))
        out.append(Series(config=config, case_id=case_id, label=text, identity=identity,
                          points=points, steps=judge_steps(points, floor_of, params)))
    return out


def _point(time: str, r: RunRecord, c: CaseRecord | None) -> Point:
    """The artifact's point of a series (`c` None: the case is missing from it)."""
    common = dict(label=label(r), commit=code_git(r).commit, time=time, run_id=r.run_id)
    if c is None:
        return Point(**common, status="missing", items_per_s=None)
    thr = c.metrics.throughput_items_per_s if c.status == "ok" else None
    n = items_of(c)
    runs = tuple(tuple(t / n for t in p) for p in process_runs(c) if p) \
        if thr is not None and n else ()
    return Point(**common, status=c.status, items_per_s=median(thr),
                 items_per_s_min=thr.min if thr is not None else None,
                 items_per_s_max=thr.max if thr is not None else None,
                 peak_memory_bytes=c.metrics.peak_memory_bytes,
                 peak_memory_source=c.metrics.peak_memory_source,
                 other_load=share(c.load), runs=runs)

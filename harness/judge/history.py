"""`mibench history`: artifacts of one folder ordered by commit time; per measurement the
series of median throughputs, its steps (change points and suspected steps, with their
verdicts: harness.judge.steps), and the peak vs the current; beside them the case's own
peak memory (harness.judge.memory), the current against the lowest of its kind (+ =
larger).

**Like with like.** A series is one measurement in `compare`'s sense (case id, workload,
model, dtype, topology, hardware: harness.judge.comparable): runs of one case id that are
not the same measurement are separate series, labelled by the fields that differ. Within a
config, an artifact without the case is a gap in its series (`missing`), never a zero.
Artifacts of other kinds in the folder (`ab`, `compile`, ...), files that are no mibench
artifact and a second artifact of one run (harness.judge.duplicates: one run is one point)
are skipped, one line each (`Folder.skipped`, `History.skipped`); a damaged mibench
artifact is an error naming it.

**Noise.** The floor of the step test is learnt from the folder's repeated runs of one
commit (harness.judge.noise: leaving out the step's two artifacts and runs on a busy
machine), else the platform's default; `History.noise` says which.

Commit time comes from git in the recorded checkout (or the current one) when the commit
is known there; otherwise the artifact's `started_at` stands in for it
(harness.judge.commits).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from pathlib import Path

from mibench.errors import MibenchError

from ..records import CaseRecord, RunRecord, read_artifact
from ..records.run import KINDS as RUN_KINDS
from ..records.summaries import items_of, median, process_runs
from ..stats.changepoint import DEFAULT, METHOD, Params
from .busy import BUSY_LEVEL, busy, share
from .commits import commit_depth, commit_time, ordered
from .comparable import code_git, differences, label, measurement
from .duplicates import unique_runs
from .memory import own
from .noise import AAGroups, aa_noise
from .steps import Step, judge_steps

__all__ = ["Folder", "History", "Point", "Series", "aa_noise", "build_history", "load_dir"]
__all__ = ["Folder", "History", "Point", "Series", "aa_noise", "build_history", "commit_depth",
           "commit_time", "load_dir", "ordered"]


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
    identity: dict  # the measurement (harness.judge.comparable.measurement)
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
    """The run artifacts of a folder, and a line for each file of another kind skipped;
    `paths`: the file each record was read from (by position; empty when not read from
    files)."""

    records: list[RunRecord]
    skipped: list[str]
    paths: list[Path] = dataclasses.field(default_factory=list)


def load_dir(folder: str | Path, load=read_artifact) -> Folder:
    """Every `*.json` run artifact under `folder` (recursively), read with `load`, each run
    once (harness.judge.duplicates); a line for each file skipped: a mibench artifact of
    another kind (`ab`, `compile`, a command's JSON output), a file that is no mibench
    artifact (no mibench `schema`), a duplicate run. A file that claims a mibench run
    schema and cannot be read (or a broken file that claims any mibench schema) is an
    error naming it."""
    folder = Path(folder)
    if not folder.is_dir():
        from mibench.files import nearby_if_absent

        raise MibenchError(f"not a folder of artifacts{nearby_if_absent(folder)}",
                           field=str(folder))
    files = sorted(f for f in folder.rglob("*.json") if f.is_file())
    if not files:
        raise MibenchError("no *.json artifacts in this folder", field=str(folder))
    records, names, skipped = [], [], []
    for f in files:
        kind = _schema(f)
        if kind is None or kind is NOT_JSON:
            why = "not JSON" if kind is NOT_JSON else "no mibench schema"
            skipped.append(f"skipped {f}: not a mibench artifact ({why})")
        elif kind in RUN_KINDS or kind is DAMAGED:
            records.append(load(f))  # a damaged one: the reader's error, naming the file
            names.append(f)
        else:
            skipped.append(f"skipped {f}: a {kind} file, not a run artifact")
    where = {id(r): f for r, f in zip(records, names, strict=True)}
    records, again = unique_runs(records, names)
    if not records:
        shown = "; ".join(line.removeprefix("skipped ") for line in skipped[:3])
        more = f"; and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        raise MibenchError(f"holds no run artifacts ({len(skipped)} other files skipped: "
                           f"{shown}{more})", field=str(folder))
    return Folder(records, skipped + again, [where[id(r)] for r in records])


DAMAGED = object()  # a file that claims a mibench schema but is no JSON object to read
NOT_JSON = object()  # a file that is no JSON and claims no mibench schema
_CLAIM = re.compile(rb'"schema"\s*:\s*"mibench\.')


def _schema(path: Path):
    """The file's mibench schema (`mibench.run/3`, ...), None when it claims none (not a
    mibench artifact), NOT_JSON when it is no JSON and claims none, DAMAGED when it cannot
    be read or parsed but may be one."""
    try:
        raw = path.read_bytes()
    except OSError:
        return DAMAGED
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return DAMAGED if _CLAIM.search(raw) else NOT_JSON
    kind = data.get("schema") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) and kind.startswith("mibench.") else None


def build_history(records: list[RunRecord], case: list[str] | str | None = None,
                  params: Params = DEFAULT, skipped: list[str] | None = None,
                  where: str = "this folder") -> History:
    """The series of every measurement (or only of the case ids that match one of the
    globs `case`) of every config, in commit order. Cases of different configs are
    different series even when their ids agree; so are cases of one id that are not the
    same measurement."""
    globs = [case] if isinstance(case, str) else list(case or [])
    records, again = unique_runs(records)
    configs: dict[str, list[tuple[str, RunRecord]]] = {}
    for time, r in ordered(records):
        configs.setdefault(str(r.config.get("name", "?")), []).append((time, r))
    platform = records[0].provenance.devices.platform if records else None
    groups = AAGroups(records)  # read once: every step's floor leaves out its own pair

    def floor_of(leave_out: frozenset[str]):
        return groups.floor_or_default(where, leave_out, platform)

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
            from mibench.errors import closest_first

            ids = list(dict.fromkeys(known))
            raise MibenchError(f"{glob!r} matches no case of these artifacts; their "
                               f"{len(ids)} case(s), the closest first: "
                               f"{closest_first(glob, ids)}", field="--case")
    floor = floor_of(frozenset())
    return History(series=series, artifacts=len(records), params=params,
                   configs=list(configs), noise=floor.source, floor=floor.value,
                   skipped=list(skipped or []) + again)


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


def window(h: History, last: int) -> History:
    """The same history with each series cut to its last `last` points (its steps among
    them, re-indexed): what a night shows of a long history (the judging uses it all)."""
    series = []
    for s in h.series:
        cut = max(0, len(s.points) - last)
        series.append(dataclasses.replace(
            s, points=s.points[cut:],
            steps=[dataclasses.replace(st, index=st.index - cut) for st in s.steps
                   if st.index - 1 >= cut]))
    return dataclasses.replace(h, series=series)

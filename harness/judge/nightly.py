"""A night's run judged against its history folder (records and the index in, one
`Judgement` per case out; no process is started, nothing is measured).

Each case of the new run is compared with the baseline run (harness.judge.compare, like
with like, at the noise floor learnt from the folder's repeated runs of one commit,
leaving out the pair judged and runs on a busy machine), then lands in one word of
harness/verdicts.py, in this order. Undecided is never good news: every case `compare`
does not show within the threshold goes to `ab` (`confirm` set), whatever the reason.

1. what `compare` fails without timing: `failed`, `missing`, `scores moved`, `memory
   regression`, `timed compiles` (the night fails, no `ab`);
2. an open known regression of the case (the same measurement): `known regression`,
   unless the run is slower than the confirmed-bad level beyond the threshold and the
   noise (a further change: `suspected regression`, confirmed against the confirming
   night's commit); faster than that level, or not told from it (undecided), `ab` against
   that commit says whether it is fixed;
3. too few timed runs for an interval (an http case is one load, one timed run):
   `inconclusive`; not the same measurement as the baseline's, or not in it:
   `insufficient data`; both for `ab`;
4. a side measured on a busy machine, and a change its load can explain: `inconclusive`,
   for `ab` (a change beyond what the load explains is `compare`'s regression: 6);
5. fewer than `NEED_QUIET` quiet runs of one commit of the measurement in the folder:
   `insufficient data` (the noise cannot be learnt), saying how many there are; `ab`;
6. slower beyond the threshold and the noise (`compare`'s `regression`), or a change
   point of the series (harness.judge.steps, among quiet points) after the baseline's
   point: `suspected regression`;
7. the whole interval within the threshold (`compare`'s `unchanged`): `pass`;
8. anything else (an interval that reaches beyond the threshold, however wide the noise
   floor; a change faster than the threshold, which `ab` confirms before it can move the
   baseline): `inconclusive`, for `ab`.

A case whose estimate is slower than the threshold, however wide its interval, is a
`suspected` one (`ab` confirms those first); a suspicion already disproved by `ab` at the
same commit, or raised by the same evidence (the same run), is `disproved` and not chased
again.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from ..records import CaseRecord, RunRecord
from ..records.nightly import NightlyIndex, Regression
from ..stats.significance import NoiseFloor
from ..verdicts import (
    ADDED,
    CANNOT_TELL,
    CHANGE_POINT,
    DISPROVED,
    FAILED,
    IMPROVEMENT,
    INCONCLUSIVE,
    INSUFFICIENT_DATA,
    KNOWN_REGRESSION,
    MEMORY_REGRESSION,
    MISSING,
    NOT_COMPARABLE,
    PASS,
    REGRESSION,
    SCORES_MOVED,
    SUSPECTED_REGRESSION,
    SUSPICIOUS_IMPROVEMENT,
    TIMED_COMPILES,
    UNCHANGED,
    UNTESTED,
)
from .busy import BUSY_LEVEL, busy
from .comparable import code_git, measurement_id
from .compare import CaseChange, Comparison, Gate, case_change, compare
from .history import History, build_history
from .noise import AAGroups

# quiet ok runs of one commit a measurement needs before the night judges its timing (the
# pair judged left out): two degrees of freedom of its own (the floor pools every case's).
# Seeding runs SEED_RUNS: the baseline is one of them and is left out of the noise that
# judges it, so four remain, one of which may be taken on a busy machine
NEED_QUIET = 3
SEED_RUNS = 5
UNTIMED_FAILS = (FAILED, MISSING, SCORES_MOVED, MEMORY_REGRESSION, TIMED_COMPILES)

CONFIRM, FIX = "confirm", "fix"  # what an `ab` of a case is for


@dataclasses.dataclass(frozen=True)
class Judgement:
    """One case's word for the night, before (and after) `ab`. `confirm`: the commit `ab`
    measures HEAD against (None: no `ab`); `purpose`: `confirm` a suspicion or see whether
    a known regression is `fix`ed; `suspected`: slower beyond the threshold (a disproval
    of it is marked in the index); change, low, high: time per item, + = slower."""

    case_id: str
    measurement: str
    verdict: str
    reason: str
    change: float | None = None
    low: float | None = None
    high: float | None = None
    source: str = "compare"
    other_load: float | None = None
    confirm: str | None = None
    purpose: str = CONFIRM
    suspected: bool = False
    evidence_run: str = ""
    known: Regression | None = None
    ab_verdict: str = ""  # `ab`'s word, once it measured the case
    later: bool = False  # a fix to check after bisecting (compare could not tell)
    run_change: float | None = None  # compare's figure, kept beside `ab`'s once it decided
    run_low: float | None = None
    run_high: float | None = None


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a night is judged on: the new run, the baseline run and commit, every run in
    the folder (the new one included), the index, the threshold, the folder's name; the
    A/A groups of the runs and their history, each built once a night (`aa`, `history`:
    built here when not given)."""

    new: RunRecord
    baseline: RunRecord
    baseline_commit: str
    runs: list[RunRecord]
    index: NightlyIndex
    threshold: float
    where: str = "the history"
    busy_level: float = BUSY_LEVEL
    aa: AAGroups | None = None
    history: History | None = None

    def __post_init__(self):
        if self.aa is None:
            object.__setattr__(self, "aa", AAGroups(self.runs))
        if self.history is None:
            object.__setattr__(self, "history", build_history(self.runs, where=self.where))

    def floor(self, leave_out: frozenset[str]) -> NoiseFloor:
        return self.aa.floor_or_default(self.where, leave_out,
                                        self.new.provenance.devices.platform)


def judge_night(e: Evidence) -> tuple[list[Judgement], Comparison]:
    """Every case of the new run (and each baseline case it lacks) judged as above, and
    `compare`'s comparison of the new run with the baseline."""
    floor = e.floor(frozenset({e.baseline.run_id, e.new.run_id}))
    comp = compare(e.baseline, e.new, threshold=e.threshold, floor=floor,
                   busy_level=e.busy_level)
    quiet = quiet_runs(e.runs, leave_out={e.baseline.run_id, e.new.run_id},
                       level=e.busy_level)
    points = change_points(e)
    cases = {c.case_id: c for c in e.new.cases}
    out = []
    for change in comp.cases:
        case = cases.get(change.case_id)
        mid = measurement_id(e.new, case) if case is not None else ""
        key = (change.case_id, mid)
        j = judge_case(e, change, case, mid, quiet.get(key, 0), points.get(key), floor)
        out.append(not_again(e.index, j, code_git(e.new).commit or ""))
    return out, comp


def judge_case(e: Evidence, c: CaseChange, case: CaseRecord | None, mid: str, quiet: int,
               point: str | None, floor: NoiseFloor) -> Judgement:
    """One case's word (the module docstring's order)."""
    common = dict(case_id=c.case_id, measurement=mid, change=c.latency_change,
                  low=c.latency_low, high=c.latency_high, other_load=c.new_other_load,
                  evidence_run=e.new.run_id)
    if c.verdict in UNTIMED_FAILS:
        return Judgement(**common, verdict=c.verdict, reason=c.reason)
    if case is None or case.status != "ok":
        return Judgement(**common, verdict=c.verdict, reason=c.reason)
    known = ([k for k in e.index.open_known() if k.case_id == c.case_id
              and k.measurement == mid] or [None])[-1]  # the latest: the level it is at now
    if known is not None:
        return judge_known(e, known, case, common)
    slower = (c.latency_change or 0.0) > e.threshold
    ask = dict(confirm=e.baseline_commit, suspected=slower)
    if c.verdict == UNTESTED:  # e.g. an http case: one load, one timed run
        shows = f"; it shows {c.latency_change:+.1%}" if c.latency_change is not None else ""
        return Judgement(**common, **ask, verdict=INCONCLUSIVE,
                         reason=f"{c.reason}{shows}: `ab` decides it")
    if c.verdict in (NOT_COMPARABLE, ADDED):
        return Judgement(**common, **ask, verdict=INSUFFICIENT_DATA,
                         reason=f"{c.verdict}: {c.reason}; `ab` against the baseline commit "
                                "decides it (`mibench nightly --reseed` starts a baseline of "
                                "this config)")
    if c.verdict == INCONCLUSIVE and (busy(c.base_other_load, e.busy_level)
                                      or busy(c.new_other_load, e.busy_level)):
        return Judgement(**common, **ask, verdict=INCONCLUSIVE, reason=c.reason)
    if quiet < NEED_QUIET and c.verdict != REGRESSION:
        return Judgement(**common, **ask, verdict=INSUFFICIENT_DATA,
                         reason=f"the history holds {quiet} quiet run(s) of one commit of "
                                f"this measurement; {NEED_QUIET} are needed to learn its "
                                "noise (seed it on a quiet machine: `mibench nightly "
                                "--reseed`); `ab` decides it")
    if c.verdict == REGRESSION:
        return Judgement(**common, **ask | {"suspected": True}, verdict=SUSPECTED_REGRESSION,
                         reason=f"{c.reason} (noise floor {floor.value:.0%}, {floor.source})")
    if point is not None:
        return Judgement(**common, **ask | {"suspected": True}, verdict=SUSPECTED_REGRESSION,
                         reason=point)
    if c.verdict == UNCHANGED:
        return Judgement(**common, verdict=PASS, reason=f"{c.verdict}: {c.reason}")
    if c.verdict in (IMPROVEMENT, SUSPICIOUS_IMPROVEMENT):
        return Judgement(**common, **ask, verdict=INCONCLUSIVE,
                         reason=f"{c.verdict}: {c.reason}; `ab` confirms an improvement "
                                "before it moves the baseline")
    return Judgement(**common, **ask, verdict=INCONCLUSIVE,
                     reason=f"{c.reason} (noise floor {floor.value:.0%}, {floor.source})")


def judge_known(e: Evidence, known: Regression, case: CaseRecord, common: dict
                ) -> Judgement:
    """A case with an open known regression: still present, slower again than its
    confirmed-bad level (a new suspicion), or faster (is it fixed? `ab` decides)."""
    named = f"known since {known.bad[:12]}" + (
        f", culprit {known.culprit[:12]} {known.subject!r}" if known.culprit else
        f" (between {known.good[:12]} and {known.bad[:12]})")
    level = next((r for r in e.runs if r.run_id == known.level_run), None)
    base_case = next((c for c in level.cases if c.case_id == case.case_id),
                     None) if level else None
    if base_case is None or base_case.status != "ok":
        return Judgement(**common, verdict=KNOWN_REGRESSION, known=known,
                         reason=f"{named}; its level run {known.level_run} is not in the "
                                "history, so a further change cannot be measured")
    floor = e.floor(frozenset({known.level_run, e.new.run_id}))
    gate = Gate(threshold=e.threshold, floor=floor.value, busy_level=e.busy_level)
    vs = case_change(level, base_case, e.new, case, gate)
    common |= dict(change=vs.latency_change, low=vs.latency_low, high=vs.latency_high)
    if vs.verdict == REGRESSION:
        return Judgement(**common, verdict=SUSPECTED_REGRESSION, confirm=known.bad,
                         suspected=True, known=known,
                         reason=f"slower than the confirmed-bad level ({named}): "
                                f"{vs.reason}")
    if vs.verdict == IMPROVEMENT:
        return Judgement(**common, verdict=KNOWN_REGRESSION, confirm=known.bad, purpose=FIX,
                         known=known, reason=f"{named}; faster than its confirmed-bad "
                                             "level: `ab` against it says whether it is fixed")
    if vs.verdict in CANNOT_TELL:  # undecided: `ab` says, after the rest
        return Judgement(**common, verdict=KNOWN_REGRESSION, confirm=known.bad, purpose=FIX,
                         known=known, later=True,
                         reason=f"{named}; `compare` cannot tell the run from its "
                                f"confirmed-bad level ({vs.verdict}: {vs.reason}): `ab` "
                                "against it says whether it is fixed")
    return Judgement(**common, verdict=KNOWN_REGRESSION, known=known,
                     reason=f"{named}; still present against its confirmed-bad level "
                            f"({vs.verdict}: {vs.reason})")


def not_again(index: NightlyIndex, j: Judgement, commit: str) -> Judgement:
    """A suspicion `ab` disproved before, at this commit or on the same evidence run:
    `disproved`, not chased again."""
    if j.confirm is None or j.purpose != CONFIRM or not j.suspected:
        return j
    done = next((d for d in index.disproved if d.case_id == j.case_id
                 and d.measurement == j.measurement
                 and (d.bad == commit or d.evidence_run == j.evidence_run)), None)
    if done is None:
        return j
    at = done.events[-1].at[:10] if done.events else "?"
    return dataclasses.replace(
        j, verdict=DISPROVED, confirm=None,
        reason=f"`ab` disproved it at {done.bad[:12]} against {done.good[:12]} "
               f"({pct(done.change)} [{pct(done.low)}, {pct(done.high)}], {done.verdict}) "
               f"on {at}: not chased again")


def quiet_runs(runs: list[RunRecord], leave_out: set[str],
               level: float = BUSY_LEVEL) -> dict[tuple[str, str], int]:
    """Per case id and measurement id, the most ok runs of one commit measured on a machine
    that was not busy (what its noise is learnt from), leaving out the runs judged."""
    counts: Counter = Counter()
    for r in runs:
        commit = code_git(r).commit
        if r.run_id in leave_out or not commit:
            continue
        for c in r.cases:
            if c.status == "ok" and c.timed_s and not busy(c.load, level):
                counts[(c.case_id, measurement_id(r, c), commit)] += 1
    best: dict[tuple[str, str], int] = {}
    for (cid, mid, _), n in counts.items():
        best[cid, mid] = max(best.get((cid, mid), 0), n)
    return best


def change_points(e: Evidence) -> dict[tuple[str, str], str]:
    """Per case id and measurement id of the new run, the reason of a change point (`regression`)
    among the series' quiet points after the baseline's point, the new point among the
    slower ones; points of a case whose suspicion `ab` disproved are left out."""
    from .steps import judge_steps

    name = str(e.new.config.get("name", "?"))
    hist = e.history
    out: dict[tuple[str, str], str] = {}
    for s in hist.series:
        if s.config != name or not s.points or s.points[-1].run_id != e.new.run_id:
            continue
        gone = {d.evidence_run for d in e.index.disproved if d.case_id == s.case_id}
        points = [p for p in s.points if p.run_id not in gone]
        base = next((i for i, p in enumerate(points) if p.run_id == e.baseline.run_id), None)
        if base is None:
            continue
        steps = judge_steps(points, e.floor, busy_level=e.busy_level)
        found = [st for st in steps if st.kind == CHANGE_POINT and st.verdict == REGRESSION
                 and st.index > base]
        if found and not busy(points[-1].other_load, e.busy_level):
            st = found[-1]
            mid = measurement_id(e.new, next(c for c in e.new.cases
                                             if c.case_id == s.case_id))
            out[s.case_id, mid] = (f"a change point of the history after the baseline: "
                                   f"{st.latency_change:+.1%} from {points[st.index].label} "
                                   f"on ({st.reason})")
    return out


def pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.1%}"

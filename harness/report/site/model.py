"""What the site shows, gathered from a nightly history (pure: site/read.py's `Job` and
its `mibench history` series in, plain records out; no statistics of its own beyond
harness.stats).

A **measurement** is one series of `history` (case id + what makes it one:
harness.judge.comparable) of one history folder: its runs (each with the night that ran it
and that night's word for the case, how busy the machine was, what changed in the
environment since the run before), its steps with their intervals, the regressions the
index records for it, the `ab` runs that measured its case, and flags for the plot (the
culprit, the acceptance, the fix). Its current verdict is the word of the last night that
ran it. Words are those of harness/verdicts.py.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import math
import re

from ...judge.comparable import measurement_id
from ...judge.environment import environment_changes
from ...judge.history import Series
from ...judge.steps import step_interval
from ...records import RunRecord
from ...records.nightly import Night, Regression
from ...util import parse_time
from ...verdicts import NIGHT_ORDER
from .read import Job


@dataclasses.dataclass(frozen=True)
class RunView:
    """One run of a measurement (a point of its series)."""

    index: int
    run_id: str
    commit: str | None
    short: str  # the commit's label
    subject: str
    started: str
    status: str  # ok / failed / skipped / missing
    items_per_s: float | None
    lo: float | None  # the slowest and fastest timed run, items/s
    hi: float | None
    other_load: float | None
    busy: bool
    verdict: str | None  # the night's word for the case
    night_at: str  # when the night that ran it was recorded ("": no night)
    links: dict[str, str]  # the night's files: name -> path relative to the history folder
    env: list[str]  # what changed in the environment since the run before

    @property
    def tip(self) -> str:
        figure = f"{self.items_per_s:,.4g} items/s" if self.items_per_s is not None \
            else self.status
        load = f", other load {self.other_load:.0%}" if self.other_load is not None else ""
        return (f"{self.short} {self.subject}: {figure}{load}"
                f"{' (busy)' if self.busy else ''}; night: {self.verdict or '-'}")


@dataclasses.dataclass(frozen=True)
class StepView:
    """A change point or suspected step (harness.judge.steps), with its interval."""

    index: int
    kind: str
    verdict: str
    change: float  # time, after / before - 1, + = slower
    low: float | None
    high: float | None
    reason: str
    commit: str  # the first run after it
    env: list[str]  # an environment change at the same place

    @property
    def short(self) -> str:
        return f"{self.change:+.0%}"

    @property
    def tip(self) -> str:
        return f"{self.kind} at {self.commit}: {self.verdict}, time {interval(self)}"


@dataclasses.dataclass(frozen=True)
class Change:
    """The overview's last change of a measurement: its latest step, or a regression (or
    improvement) `ab` confirmed at a later run, whichever is later."""

    change: float | None
    low: float | None
    high: float | None
    verdict: str
    what: str  # `change point at abc12345`, `accepted (ab, 5 rounds) at abc12345`


@dataclasses.dataclass(frozen=True)
class Flag:
    """A culprit, an acceptance or a fix, drawn before the run `index`."""

    index: int
    kind: str  # culprit / confirmed (no culprit named) / accepted / fixed
    text: str
    tip: str


@dataclasses.dataclass(frozen=True)
class EnvMark:
    index: int
    changes: list[str]
    hit: bool  # a step sits at the same place


@dataclasses.dataclass(frozen=True)
class AbView:
    """One `ab` run that measured the case: its change and interval (time per call, + =
    slower) and the regressions it stands behind."""

    path: str  # relative to the history folder
    base: str
    new: str
    rounds: int
    change: float | None
    low: float | None
    high: float | None
    verdict: str
    why: str
    rounds_change: list[float]  # each round's new / base - 1
    behind: list[str]  # ids of the regressions it confirmed, disproved or closed


@dataclasses.dataclass(frozen=True)
class Measurement:
    key: str  # the case page's file name, without .html
    slug: str  # the history folder's name in the site
    config: str
    case_id: str
    measurement: str  # harness.judge.comparable.measurement_id
    label: str  # what tells it from other measurements of its case id ("" if none)
    identity: dict
    runs: list[RunView]
    steps: list[StepView]
    flags: list[Flag]
    envs: list[EnvMark]
    verdict: str  # the last night's word for it ("-": no night ran it)
    regressions: list[Regression]
    ab: list[AbView]

    @property
    def open(self) -> Regression | None:
        return next((r for r in reversed(self.regressions) if r.is_open), None)

    @property
    def last_change(self) -> Change | None:
        found = [(s.index, 0, Change(s.change, s.low, s.high, s.verdict,
                                     f"{s.kind} at {s.commit}")) for s in self.steps]
        for r in self.regressions:
            at = next((x.index for x in self.runs if r.bad and x.commit == r.bad), None)
            if at is not None and r.status in ("confirmed", "accepted", "fixed"):
                word = r.verdict if r.kind == "improvement" else "regression"
                found.append((at, 1, Change(r.change, r.low, r.high, word,
                                            f"{r.status} ({r.source}) at {r.bad[:8]}")))
        return max(found, key=lambda f: f[:2])[2] if found else None

    @property
    def current(self) -> float | None:
        return next((r.items_per_s for r in reversed(self.runs) if r.items_per_s is not None),
                    None)

    @property
    def what(self) -> str:
        """What makes it one measurement, in a line."""
        i = self.identity
        shape = "/".join(str(i.get(f"workload.{k}", "?")) for k in
                         ("query_tokens", "num_items", "item_tokens"))
        return (f"{i.get('model')} {i.get('dtype')} tp={i.get('tp')} · {i.get('devices')}"
                f" · query/items/item {shape}")


def interval(x) -> str:
    """`+12.0% [+8.0%, +16.0%]` of anything with change, low, high."""
    if x.change is None:
        return "-"
    text = f"{x.change:+.1%}"
    return text + (f" [{x.low:+.1%}, {x.high:+.1%}]" if x.low is not None else "")


def rank(m: Measurement) -> tuple:
    """The overview's order: open regressions first, then by the word that needs a look."""
    word = NIGHT_ORDER.index(m.verdict) if m.verdict in NIGHT_ORDER else len(NIGHT_ORDER)
    return (m.open is None, word, m.config, m.case_id, m.label)


def measurements(job: Job, series: list[Series], floor: float) -> list[Measurement]:
    """Every series of the job's history as a measurement (the module docstring)."""
    records = {r.run_id: r for r in job.runs}
    night_of = {rid: n for n in job.index.nights for rid in n.runs}
    subjects = commit_subjects(job)
    return [_measurement(job, s, records, night_of, subjects, floor) for s in series]


def commit_subjects(job: Job) -> dict[str, str]:
    out = {n.commit: n.subject for n in job.index.nights if n.subject}
    for r in job.index.regressions:
        out |= {c.commit: c.subject for c in r.culprits if c.subject}
    return out


def _measurement(job: Job, s: Series, records: dict[str, RunRecord],
                 night_of: dict[str, Night], subjects: dict[str, str], floor: float
                 ) -> Measurement:
    first = next(p for p in s.points if p.status != "missing")
    rec = records[first.run_id]
    mid = measurement_id(rec, next(c for c in rec.cases if c.case_id == s.case_id))
    runs = _runs(job, s, records, night_of, subjects)
    steps = []
    for st in s.steps:
        got = step_interval(s.points, s.steps, st, floor)
        change, low, high = got if got else (st.latency_change, None, None)
        steps.append(StepView(index=st.index, kind=st.kind, verdict=st.verdict,
                              change=change, low=low, high=high, reason=st.reason,
                              commit=runs[st.index].short, env=runs[st.index].env))
    at = {st.index for st in steps}
    envs = [EnvMark(r.index, r.env, r.index in at) for r in runs if r.env]
    regs = [r for r in job.index.regressions
            if r.case_id == s.case_id and r.measurement == mid]
    last = next((night_of[p.run_id] for p in reversed(s.points) if p.run_id in night_of),
                None)
    return Measurement(
        key=page_key(job.slug, s.case_id, mid), slug=job.slug, config=s.config,
        case_id=s.case_id, measurement=mid, label=s.label, identity=s.identity, runs=runs,
        steps=steps, flags=flags(regs, runs), envs=envs,
        verdict=last.cases.get(s.case_id, "-") if last else "-", regressions=regs,
        ab=ab_views(job, s.case_id, regs))


def _runs(job: Job, s: Series, records, night_of, subjects) -> list[RunView]:
    from ..changes import point_labels  # `abc12345 #2`: a commit's second run

    out, before = [], None
    for i, (p, short) in enumerate(zip(s.points, point_labels(s.points), strict=True)):
        rec = records.get(p.run_id)
        night = night_of.get(p.run_id)
        env = environment_changes(before, rec) if before is not None and rec is not None \
            and p.status != "missing" else []
        if rec is not None and p.status != "missing":
            before = rec
        out.append(RunView(
            index=i, run_id=p.run_id, commit=p.commit, short=short,
            subject=subjects.get(p.commit or "", ""),
            started=rec.started_at if rec else p.time, status=p.status,
            items_per_s=p.items_per_s, lo=p.items_per_s_min, hi=p.items_per_s_max,
            other_load=p.other_load, busy=p.busy(),
            verdict=night.cases.get(s.case_id) if night else None,
            night_at=night.at if night else "", links=night_links(job, night), env=env))
    return out


def night_links(job: Job, night: Night | None) -> dict[str, str]:
    """The night's files that the folder holds: summary, report, history (relative to the
    history folder)."""
    if night is None or not night.summary:
        return {}
    folder = night.summary.rsplit("/", 1)[0]
    names = {"summary": "summary.md", "report": "report.md", "history": "history.md"}
    return {k: f"{folder}/{v}" for k, v in names.items() if f"{folder}/{v}" in job.files}


def flags(regs: list[Regression], runs: list[RunView]) -> list[Flag]:
    """Where the plot marks each regression's culprit (before the first run of the night
    that confirmed it), its acceptance (before the first run of a night after it) and its
    fix (before the first run of the night that showed it)."""
    out = []

    def first(commit: str | None) -> int | None:
        return next((r.index for r in runs if commit and r.commit == commit), None)

    for r in regs:
        if r.kind != "regression":
            continue
        at = first(r.bad)
        if at is not None and not r.culprits and r.status != "suspected" \
                and r.status != "disproved":
            out.append(Flag(at, "confirmed", "confirmed, no culprit named",
                            f"{r.case_id} {interval(r)} ({r.source}): {r.bisect or '-'}"))
        for c in r.culprits if at is not None else []:
            out.append(Flag(at, "culprit", f"culprit {c.commit[:8]}",
                            f"culprit {c.commit[:12]} {c.subject!r}"
                            f"{' (part of the change)' if c.partial else ''}: {r.case_id} "
                            f"{interval(r)} ({r.source})"))
        if r.accepted is not None:
            when = _time(r.accepted.at)
            after = next((x.index for x in runs if x.night_at and _time(x.night_at) > when),
                         len(runs))
            out.append(Flag(after, "accepted", f"accepted by {r.accepted.by}",
                            f"accepted by {r.accepted.by} on {r.accepted.at[:10]}: "
                            f"{r.accepted.why}"))
        fixed = first(r.fixed_at)
        if fixed is not None:
            out.append(Flag(fixed, "fixed", f"fixed at {r.fixed_at[:8]}", r.fix or "fixed"))
    return sorted(out, key=lambda f: f.index)


def _time(iso: str) -> dt.datetime:
    return parse_time(iso) or dt.datetime.min.replace(tzinfo=dt.UTC)


def ab_views(job: Job, case_id: str, regs: list[Regression]) -> list[AbView]:
    """The job's `ab` runs that measured the case, and which regressions each stands
    behind (it compared the commits the regression was judged or closed on)."""
    out = []
    for path, rec in job.ab:
        for c in rec.cases:
            if c.case_id != case_id:
                continue
            t = c.timing
            base, new = rec.base.commit, rec.new.commit
            behind = [r.id for r in regs if (r.good, r.bad) == (base, new)
                      or (r.fixed_at is not None and (r.bad, r.fixed_at) == (base, new))]
            out.append(AbView(
                path=path, base=base, new=new, rounds=t.rounds if t else rec.rounds,
                change=t.change if t else None, low=t.low if t else None,
                high=t.high if t else None, verdict=c.verdict or "-", why=c.why,
                rounds_change=[math.expm1(x) for x in t.round_log_ratios] if t else [],
                behind=behind))
    return out


def page_key(slug: str, case_id: str, mid: str) -> str:
    """A short file-safe name for a measurement's page."""
    readable = re.sub(r"[^A-Za-z0-9_.-]+", "-", case_id).strip("-.")[:48]
    digest = hashlib.sha256(f"{slug}\0{case_id}\0{mid}".encode()).hexdigest()[:8]
    return f"{slug}--{readable}--{digest}"

"""The nightly loop's records (docs/nightly.md): the history folder's index (schema
`mibench.nightly/2`, `HISTORY/index.json`, rewritten whole under a lock after every night
and every `accept`) and a night's summary, the JSON twin of its Markdown
(`mibench.nightly-summary/2`).

The index is what the next night starts from: the current baseline (the commit the
night's suspicions are confirmed against, and the run whose level they are judged
against), every night with its verdict, and every regression the nightly found with its
life cycle (`Regression`): suspected (a suspicion left open), confirmed (`ab` confirmed it;
its culprit), disproved (`ab` did not), accepted (who, why, when), fixed (a later night's
`ab` showed it back at the baseline level); a confirmed improvement is kept too, flagged
for a look. Verdict words are those of harness/verdicts.py.

nightly/1 kept the confirmed regressions in `known` and the disproved suspicions in
`disproved`; such an index is read as nightly/2 with each entry a `Regression` of the
same case, commits, change, culprit, acceptance and status (`open` is `confirmed`), and
the first save keeps the old file beside the new one (`index.nightly-1.json`).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from .base import Artifact, Measured, Record
from .io import read_json, schema_file

NIGHTLY_SCHEMA = "mibench.nightly/2"
NIGHTLY_OLDER = ("mibench.nightly/1",)
SUMMARY_SCHEMA = "mibench.nightly-summary/2"
SUMMARY_OLDER = ("mibench.nightly-summary/1",)
INDEX_FILE = "index.json"
REGRESSIONS_SCHEMA = "mibench.regressions/1"  # `mibench regressions --format json`

Status = Literal["suspected", "confirmed", "disproved", "accepted", "fixed"]
OPEN = "confirmed"  # a confirmed regression not yet fixed or accepted: failing every night


class Baseline(Record):
    """What later nights are judged against: `commit` (the last commit that passed: `ab`'s
    base) and the run `run_id` at `artifact` (relative to the history folder), whose
    cases' level `compare` judges the new run against."""

    commit: str
    subject: str = ""
    run_id: str
    artifact: str
    since: str  # ISO time it became the baseline
    reason: str  # seed / pass / accepted / reseed, in a line


class Acceptance(Record):
    """Who accepted an intended regression (or an improvement), why and when (`mibench
    accept`)."""

    by: str
    why: str
    at: str


class Event(Record):
    """One step of a regression's life cycle: when, the status it moved to, the night's
    commit, in a line."""

    at: str
    status: Status
    commit: str = ""
    note: str = ""


class CulpritCommit(Record):
    """A commit bisect named: all of the change, or part of it (`partial`: two commits each
    made a part); `change` per case (time, + = slower)."""

    commit: str
    subject: str = ""
    change: dict[str, float] = {}
    partial: bool = False


class Regression(Record):
    """A regression (or a confirmed improvement, `kind`) of one measurement, with its life
    cycle. `good` is the commit it was judged against (`ab`'s base), `bad` the night's
    commit that raised or confirmed it, `level_run` that night's run (the confirmed-bad
    level a further change is measured from); change, low, high: `ab`'s (or `compare`'s
    while only suspected), time per call, + = slower."""

    id: str
    kind: Literal["regression", "improvement"] = "regression"
    case_id: str
    measurement: str  # harness.judge.comparable.measurement_id
    status: Status
    good: str
    bad: str
    evidence_run: str = ""  # the run that raised the suspicion
    level_run: str = ""
    change: Measured = None
    low: Measured = None
    high: Measured = None
    source: str = ""  # `ab, N rounds` / `compare`
    verdict: str = ""  # the word that settled it (`ab`'s, or the night's)
    culprit: str | None = None  # the first bad commit (None: bisect named none)
    subject: str | None = None
    culprits: list[CulpritCommit] = []  # every commit bisect named
    bisect: str = ""  # how bisect went, or why it did not run
    reproduce: str = ""  # the command that shows it again
    confirmed_at: str = ""
    accepted: Acceptance | None = None
    fixed_at: str | None = None  # the commit whose night showed it fixed
    fix: str = ""  # the evidence that closed it (`ab`'s line)
    events: list[Event] = []

    @property
    def is_open(self) -> bool:
        """A confirmed regression not yet fixed or accepted."""
        return self.kind == "regression" and self.status == OPEN

    def moved(self, status: Status, at: str, commit: str = "", note: str = "") -> None:
        self.status = status
        self.events.append(Event(at=at, status=status, commit=commit, note=note))


def regression_id(case_id: str, measurement: str, commit: str, kind: str = "regression"
                  ) -> str:
    """A stable id: the measurement's case and the commit that raised it (a short hash of
    the three, so ids stay short and file-safe)."""
    digest = hashlib.sha256(f"{kind}\0{case_id}\0{measurement}\0{commit}".encode())
    return f"{kind[0]}-{commit[:8]}-{digest.hexdigest()[:8]}"


class Night(Record):
    """One night: its commit, its runs (several when seeding), each case's word, the
    night's word and exit code, whether it promoted the baseline, the cases it left
    undecided, its summary."""

    at: str
    commit: str
    subject: str = ""
    runs: list[str] = []
    cases: dict[str, str] = {}  # case id -> verdict word
    verdict: str
    exit_code: int
    promoted: bool = False
    undecided: list[str] = []  # the cases no evidence decided (the night kept the baseline)
    summary: str = ""  # the Markdown summary, relative to the history folder


class NightlyIndex(Artifact):
    """`HISTORY/index.json`: the history folder's record of the nightly loop."""

    schema_: Literal["mibench.nightly/2"] = Field(default=NIGHTLY_SCHEMA, alias="schema")
    config: str  # the config's name
    target: Literal["engines", "server"] = "engines"  # what a commit changes (--server-repo)
    baseline: Baseline | None = None
    nights: list[Night] = []
    regressions: list[Regression] = []
    migrated_from: str | None = None  # the schema this index was read from, until saved

    @model_validator(mode="before")
    @classmethod
    def from_nightly_1(cls, data):
        """A nightly/1 index (its `known` and `disproved`) as nightly/2."""
        if not isinstance(data, dict) or ("known" not in data and "disproved" not in data):
            return data
        data = dict(data)
        out = [_from_known(k) for k in data.pop("known", []) or []]
        out += [_from_disproved(d) for d in data.pop("disproved", []) or []]
        return {**data, "regressions": out, "migrated_from": NIGHTLY_OLDER[0]}

    def open_known(self) -> list[Regression]:
        return [r for r in self.regressions if r.is_open]

    @property
    def known(self) -> list[Regression]:
        """Every confirmed regression, whatever became of it (open, fixed, accepted)."""
        return [r for r in self.regressions if r.kind == "regression"
                and r.status in ("confirmed", "fixed", "accepted")]

    @property
    def disproved(self) -> list[Regression]:
        return [r for r in self.regressions if r.status == "disproved"]

    def find(self, regression_id: str) -> Regression | None:
        return next((r for r in self.regressions if r.id == regression_id), None)


def _from_known(k: dict) -> dict:
    status = {"open": "confirmed"}.get(k.get("status", "open"), k.get("status", "open"))
    at = k.get("confirmed_at", "")
    events = [{"at": at, "status": "confirmed", "commit": k.get("bad", ""),
               "note": "migrated from mibench.nightly/1"}]
    if status == "accepted" and k.get("accepted"):
        events.append({"at": k["accepted"]["at"], "status": "accepted",
                       "note": f"by {k['accepted']['by']}: {k['accepted']['why']}"})
    if status == "fixed":
        events.append({"at": at, "status": "fixed", "commit": k.get("fixed_at") or ""})
    culprits = ([{"commit": k["culprit"], "subject": k.get("subject") or ""}]
                if k.get("culprit") else [])
    return {"id": regression_id(k["case_id"], k["measurement"], k["bad"]),
            "case_id": k["case_id"], "measurement": k["measurement"], "status": status,
            "good": k["good"], "bad": k["bad"], "level_run": k.get("level_run", ""),
            "change": k.get("change"), "low": k.get("low"), "high": k.get("high"),
            "source": "ab", "verdict": "regression", "culprit": k.get("culprit"),
            "subject": k.get("subject"), "culprits": culprits, "bisect": k.get("bisect", ""),
            "confirmed_at": at, "accepted": k.get("accepted"), "fixed_at": k.get("fixed_at"),
            "events": events}


def _from_disproved(d: dict) -> dict:
    return {"id": regression_id(d["case_id"], d["measurement"], d["commit"]),
            "case_id": d["case_id"], "measurement": d["measurement"], "status": "disproved",
            "good": d["base"], "bad": d["commit"], "evidence_run": d["evidence_run"],
            "change": d.get("change"), "low": d.get("low"), "high": d.get("high"),
            "source": "ab", "verdict": d["verdict"],
            "events": [{"at": d["at"], "status": "disproved", "commit": d["commit"],
                        "note": f"ab: {d['verdict']} (migrated from mibench.nightly/1)"}]}


class SummaryCase(Record):
    """One case of a night's summary: its word, the change with its interval and where it
    comes from (`ab`: paired rounds; `compare`: the run against the baseline), why; the
    unpaired figure beside `ab`'s when `ab` measured it."""

    case_id: str
    verdict: str
    change: Measured = None  # time, + = slower
    low: Measured = None
    high: Measured = None
    source: str = ""  # ab / compare / known
    reason: str = ""
    other_load: Measured = None  # the new run's other processes' share of the CPU
    run_change: Measured = None  # the run against the baseline (compare), when ab decided
    run_low: Measured = None
    run_high: Measured = None


class Culprit(Record):
    commit: str
    subject: str
    cases: list[str] = []
    known: bool = False  # reported again as a known regression (not bisected again)
    bisect: str = ""
    partial: bool = False  # one of several commits that each made part of the change


class NightSummary(Artifact):
    """The JSON twin of a night's Markdown summary (`summary.json`)."""

    schema_: Literal["mibench.nightly-summary/2"] = Field(default=SUMMARY_SCHEMA,
                                                          alias="schema")
    config: str
    commit: str
    subject: str = ""
    baseline: str | None = None  # the baseline commit judged against
    verdict: str
    exit_code: int
    promoted: bool = False
    cases: list[SummaryCase] = []
    culprits: list[Culprit] = []
    undecided: list[str] = []  # what was left open, and the command that decides it
    reproduce: list[str] = []  # commands
    notes: list[str] = []  # what the night must say: a blind run of nights, a force-push...
    noise: str = ""
    links: dict[str, str] = {}  # report, history, index, summary
    seconds: dict[str, float] = {}  # run, confirm, bisect


def read_index(path: str | Path) -> NightlyIndex:
    return read_json(path, NightlyIndex, NIGHTLY_SCHEMA,
                     " (a nightly history's index: keep the folder to one nightly job)",
                     older=NIGHTLY_OLDER)


def read_summary(path: str | Path) -> NightSummary:
    return read_json(path, NightSummary, SUMMARY_SCHEMA, older=SUMMARY_OLDER)


INDEX_SCHEMA_FILE = schema_file(NIGHTLY_SCHEMA)

"""The nightly loop's records (docs/nightly.md): the history folder's index (schema
`mibench.nightly/1`, `HISTORY/index.json`, rewritten atomically after every night) and a
night's summary, the JSON twin of its Markdown (`mibench.nightly-summary/1`).

The index is what the next night starts from: the current baseline (the commit the
night's suspicions are confirmed against, and the run whose level they are judged
against), every night with its verdict, the regressions `ab` confirmed (their culprit, the
confirmed-bad level, whether fixed or accepted, by whom and why) and the suspicions it
disproved (so they are not chased again). Verdict words are those of harness/verdicts.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from .base import Artifact, Measured, Record
from .io import read_json, schema_file

NIGHTLY_SCHEMA = "mibench.nightly/1"
SUMMARY_SCHEMA = "mibench.nightly-summary/1"
INDEX_FILE = "index.json"


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
    """Who accepted an intended regression, why and when (`mibench accept`)."""

    by: str
    why: str
    at: str


class Known(Record):
    """A regression `ab` confirmed: failing every night (not bisected again) until fixed or
    accepted. `level_run` is the confirming night's run: the confirmed-bad level a
    further change is measured from."""

    case_id: str
    measurement: str  # harness.stats.comparable.measurement_id
    culprit: str | None = None  # the first bad commit (None: bisect named none)
    subject: str | None = None
    good: str  # the passing commit it was confirmed against
    bad: str  # the commit of the night that confirmed it
    level_run: str
    change: Measured = None  # ab's change of time per call (+ = slower) and its interval
    low: Measured = None
    high: Measured = None
    confirmed_at: str
    bisect: str = ""  # found / what left it undecided / why it did not run
    status: Literal["open", "fixed", "accepted"] = "open"
    accepted: Acceptance | None = None
    fixed_at: str | None = None  # the commit whose night showed it fixed


class Disproved(Record):
    """A suspicion `ab` did not confirm (unchanged or faster): not chased again at
    `commit`, nor on the same evidence (`evidence_run`: the run that raised it)."""

    case_id: str
    measurement: str
    commit: str
    evidence_run: str
    base: str  # ab's base commit
    change: Measured = None
    low: Measured = None
    high: Measured = None
    verdict: str  # ab's word: unchanged or improvement
    at: str


class Night(Record):
    """One night: its commit, its runs (several when seeding), each case's word, the
    night's word and exit code, whether it promoted the baseline, its summary."""

    at: str
    commit: str
    subject: str = ""
    runs: list[str] = []
    cases: dict[str, str] = {}  # case id -> verdict word
    verdict: str
    exit_code: int
    promoted: bool = False
    summary: str = ""  # the Markdown summary, relative to the history folder


class NightlyIndex(Artifact):
    """`HISTORY/index.json`: the history folder's record of the nightly loop."""

    schema_: Literal["mibench.nightly/1"] = Field(default=NIGHTLY_SCHEMA, alias="schema")
    config: str  # the config's name
    target: Literal["engines", "server"] = "engines"  # what a commit changes (--server-repo)
    baseline: Baseline | None = None
    nights: list[Night] = []
    known: list[Known] = []
    disproved: list[Disproved] = []

    def open_known(self) -> list[Known]:
        return [k for k in self.known if k.status == "open"]


class SummaryCase(Record):
    """One case of a night's summary: its word, the change with its interval and where it
    comes from (`ab`: paired rounds; `compare`: the run against the baseline), why."""

    case_id: str
    verdict: str
    change: Measured = None  # time, + = slower
    low: Measured = None
    high: Measured = None
    source: str = ""  # ab / compare / known
    reason: str = ""
    other_load: Measured = None  # the new run's other processes' share of the CPU


class Culprit(Record):
    commit: str
    subject: str
    cases: list[str] = []
    known: bool = False  # reported again as a known regression (not bisected again)
    bisect: str = ""


class NightSummary(Artifact):
    """The JSON twin of a night's Markdown summary (`summary.json`)."""

    schema_: Literal["mibench.nightly-summary/1"] = Field(default=SUMMARY_SCHEMA,
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
    undecided: list[str] = []  # what the budget left open, and the command that decides it
    reproduce: list[str] = []  # commands
    noise: str = ""
    links: dict[str, str] = {}  # report, history, index, summary
    seconds: dict[str, float] = {}  # run, confirm, bisect


def read_index(path: str | Path) -> NightlyIndex:
    return read_json(path, NightlyIndex, NIGHTLY_SCHEMA,
                     " (a nightly history's index: keep the folder to one nightly job)")


def read_summary(path: str | Path) -> NightSummary:
    return read_json(path, NightSummary, SUMMARY_SCHEMA)


INDEX_SCHEMA_FILE = schema_file(NIGHTLY_SCHEMA)

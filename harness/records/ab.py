"""The A/B artifact (schema `mibench.ab/4`): both revisions, every round's samples of both
sides (with how busy the machine was), each JAX case's compiled cost at both revisions when
a TPU target was given, and the verdict of each case with the numbers behind it, in the
words of harness/verdicts.py."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ..verdicts import legacy_verdict
from .base import Header, Measured, Record
from .case import WorkloadRecord
from .compile import CompileCase, CompileTarget, LibTpu
from .io import read_json, schema_file
from .run import CaseLoad, ServerInfo
from .servers import ColdStartRecord, SloRecord

# ab/2 adds `servers` (an A/B of server versions); ab/3 stores the verdict words of
# harness/verdicts.py (`unchanged` or `inconclusive` where ab/2 stored `no change`; the
# run's `pass` and `not compared` where it stored `no regression` and `nothing compared`)
# and each round sample's `load`; ab/4 adds the case verdict `suspicious improvement` (2x
# or more faster without the new side's modes/engines parity: harness/judge/suspicious.py);
# ab/1 to ab/3 artifacts read as ab/4, the words of ab/1 and ab/2 translated (`legacy`)
AB_SCHEMA = "mibench.ab/4"
AB_OLDER = ("mibench.ab/1", "mibench.ab/2", "mibench.ab/3")
OLD_RUN_VERDICTS = {"no regression": "pass", "nothing compared": "not compared"}
CaseVerdict = Literal["regression", "improvement", "unchanged", "inconclusive", "untested",
                      "cold start regression", "suspicious improvement"]


def _legacy_timing(timing: dict) -> dict:
    """A stored paired verdict's `no change` as the word it means."""
    return {**timing, "verdict": legacy_verdict(timing.get("verdict"), timing.get("low"),
                                                timing.get("high"),
                                                timing.get("min_effect", 0.0))}
AB_SCHEMA_FILE = schema_file(AB_SCHEMA)


class Side(Record):
    rev: str
    commit: str
    subject: str


class RoundSample(Record):
    """One side of one round: a fresh worker measured the case."""

    round: int
    first: bool  # measured first in its round (the order alternates)
    status: str
    error: str | None = None
    compile_s: float | None = None
    timed_s: list[float] = []
    median_s: float | None = None
    score_digest: str | None = None
    # how busy the machine was while this side was measured (ab is exempt from the busy
    # rule: both sides of a round share the load; the report says when it was high)
    load: CaseLoad | None = None


class Timing(Record):
    """`mibench.harness.judge.paired.PairedVerdict` of the rounds' log ratios, which it
    keeps (`round_log_ratios`, positive: new slower)."""

    method: str
    rounds: int
    change: Measured
    low: Measured
    high: Measured
    p_value: Measured
    alpha: float
    min_effect: float
    verdict: CaseVerdict
    round_log_ratios: list[float] = []

    @model_validator(mode="before")
    @classmethod
    def legacy(cls, data):
        return _legacy_timing(data) if isinstance(data, dict) else data


class ScoresMoved(Record):
    """The first round's scores of both sides, compared as log scores."""

    max_log_diff: Measured
    tolerance: float
    moved: bool


class CostCheck(Record):
    """One case compiled at both revisions for the record's `compile_target`."""

    base: CompileCase
    new: CompileCase
    changes: list[str] = []  # every difference, exact
    regressions: list[str] = []  # the ones that fail the gate

    def line(self) -> str:
        if self.regressions:
            return "compiled cost: " + "; ".join(self.regressions)
        return "compiled cost: " + ("; ".join(self.changes) if self.changes else "unchanged")


class ABCase(Record):
    case_id: str
    engine: str
    mode: str
    params: dict
    model: str
    dtype: str
    tp: int
    workload: WorkloadRecord
    base: list[RoundSample] = []
    new: list[RoundSample] = []
    timing: Timing | None = None
    scores: ScoresMoved | None = None
    cost: CostCheck | None = None  # compiled for the record's compile_target (JAX cases)
    # a server A/B (mibench ab --server-repo): each side's launched server
    servers: dict[str, ServerInfo] = {}
    # an slo case: each side's capacity search (its rounds are measured at its rate found)
    slo: dict[str, SloRecord] = {}
    # a case with cold starts: each side's launches (one a round) and the paired tests of
    # `launch to ready` and `first request`
    cold_start: dict[str, ColdStartRecord] = {}
    cold_timing: dict[str, Timing] = {}
    # regression (slower, moved scores, or new fails where base runs), improvement,
    # unchanged, inconclusive, untested (base failed or too few rounds), suspicious
    # improvement (2x or more faster, the new side's modes/engines parity not passed)
    verdict: CaseVerdict | None = None
    why: str = ""

    @model_validator(mode="before")
    @classmethod
    def legacy(cls, data):
        """An ab/1 or ab/2 case's `no change` as the word its timing means."""
        if isinstance(data, dict) and data.get("verdict") == "no change":
            timing = _legacy_timing(data.get("timing") or {})
            data = {**data, "verdict": timing.get("verdict", "inconclusive")}
        return data


class ABRecord(Header):
    schema_: Literal["mibench.ab/4"] = Field(default=AB_SCHEMA, alias="schema")
    base: Side
    new: Side
    rounds: int
    # calls: both sides' workers alive, their calls alternating (JAX on the CPU); sides: one
    # side after the other in each round (a GPU or TPU, owned by one process)
    pacing: Literal["calls", "sides"] = "sides"
    order: list[list[str]] = []  # per round, the sides in the order they ran (first call)
    compile_target: CompileTarget | None = None  # the TPU slice both sides compiled for
    libtpu: LibTpu | None = None
    cases: list[ABCase] = []
    # the run's outcome: regression / pass / not compared (harness/verdicts.py OUTCOME)
    verdict: Literal["regression", "pass", "not compared"] | None = None

    @model_validator(mode="before")
    @classmethod
    def legacy(cls, data):
        """An ab/1 or ab/2 run's `no regression` / `nothing compared` as `pass` / `not
        compared`."""
        if isinstance(data, dict) and data.get("verdict") in OLD_RUN_VERDICTS:
            data = {**data, "verdict": OLD_RUN_VERDICTS[data["verdict"]]}
        return data


def read_ab(path: str | Path) -> ABRecord:
    """Read and validate an A/B artifact; every unreadable input is one MibenchError."""
    return read_json(path, ABRecord, AB_SCHEMA, older=AB_OLDER)

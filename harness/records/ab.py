"""The A/B artifact (schema `mibench.ab/2`): both revisions, every round's samples of both
sides, each JAX case's compiled cost at both revisions when a TPU target was given, and
the verdict of each case with the numbers behind it."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from mibench.harness.records.base import Header, Measured, Record
from mibench.harness.records.case import WorkloadRecord
from mibench.harness.records.compile import CompileCase, CompileTarget, LibTpu
from mibench.harness.records.io import read_json, schema_file
from mibench.harness.records.run import ServerInfo

# ab/2 adds `servers` (an A/B of server versions); ab/1 artifacts read as ab/2
AB_SCHEMA = "mibench.ab/2"
AB_OLDER = ("mibench.ab/1",)
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


class Timing(Record):
    """`mibench.harness.stats.paired.PairedVerdict` of the rounds' log ratios, which it
    keeps (`round_log_ratios`, positive: new slower)."""

    method: str
    rounds: int
    change: Measured
    low: Measured
    high: Measured
    p_value: Measured
    alpha: float
    min_effect: float
    verdict: str
    round_log_ratios: list[float] = []


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
    # regression (slower, moved scores, or new fails where base runs), improvement,
    # no change, untested (base failed or too few rounds)
    verdict: Literal["regression", "improvement", "no change", "untested"] | None = None
    why: str = ""


class ABRecord(Header):
    schema_: Literal["mibench.ab/2"] = Field(default=AB_SCHEMA, alias="schema")
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
    verdict: str | None = None  # the run's: regression / no regression / nothing compared


def read_ab(path: str | Path) -> ABRecord:
    """Read and validate an A/B artifact; every unreadable input is one MibenchError."""
    return read_json(path, ABRecord, AB_SCHEMA, older=AB_OLDER)

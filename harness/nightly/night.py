"""One night's shared pieces (the loop, nightly/loop.py, and a seeding night,
nightly/seed.py): its options, what it knows as it goes, its word and exit code, and how
it is written: the index first (merged as it stands, nightly/store.py), then the summary,
which says only what the index kept."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..judge.nightly import SEED_RUNS, Judgement
from ..judge.noise import AAGroups
from ..records import RunRecord
from ..records.io import write_artifact, write_output
from ..records.nightly import Night, NightlyIndex, NightSummary, SummaryCase
from . import store
from .index import Folder
from .summary import render


@dataclasses.dataclass(frozen=True)
class NightlyOptions:
    """How a night judges and what it may spend (docs/cli.md `nightly`)."""

    history: Path
    config: str  # the config's name
    target: str = "engines"  # or "server" (--server-repo)
    threshold: float = 0.05
    rounds: int = 5
    max_rounds: int | None = None  # default 4 x rounds
    max_commits: int = 32
    budget_s: float = 3600.0
    seed_runs: int = SEED_RUNS
    reseed: bool = False
    max_undecided: int = 3  # undecided nights in a row that fail the job (BLIND_EXIT)
    link_base: str = ""  # prefix of the summary's links (e.g. the CI run's artifacts page)

    @property
    def most_rounds(self) -> int:
        return max(self.rounds, self.max_rounds if self.max_rounds is not None
                   else 4 * self.rounds)


@dataclasses.dataclass(frozen=True)
class NightResult:
    summary: NightSummary
    markdown: str
    folder: Path  # the night's folder

    @property
    def exit_code(self) -> int:
        return self.summary.exit_code


@dataclasses.dataclass
class Tonight:
    """What one night knows as it goes: the folder, the index it read at its start, HEAD,
    its folder of files, the runs in the history, the lines it must say."""

    o: NightlyOptions
    steps: object
    folder: Folder
    started: NightlyIndex
    head: tuple[str, str]
    where: Path
    runs: list[RunRecord]
    notes: list[str]
    clock: Callable[[], float]
    note: Callable[[str], None]
    evidence: object = None  # judge.Evidence, once the night's run is judged


def summary_case(j: Judgement) -> SummaryCase:
    return SummaryCase(case_id=j.case_id, verdict=j.verdict, change=j.change, low=j.low,
                       high=j.high, source=j.source, reason=j.reason, other_load=j.other_load,
                       run_change=j.run_change, run_low=j.run_low, run_high=j.run_high)


def noise_floor(aa: AAGroups, new: RunRecord, folder: Folder) -> str:
    """The noise floor the night's run is judged at (leaving it out) and its source."""
    floor = aa.floor_or_default(str(folder.runs), frozenset({new.run_id}),
                                new.provenance.devices.platform)
    return f"{floor.value:.1%} ({floor.source})"


def write_night(n: Tonight, mine: NightlyIndex, night: Night, summary: NightSummary,
                links: dict) -> NightResult:
    """The index first (the night merged into it as it stands: nightly/store.py), then the
    summary and its twin, saying what the index kept; a failed index write leaves a summary
    that says so, and is exit 4."""
    o, folder = n.o, n.folder
    mine.nights.append(night)
    summary.links = {name: o.link_base + folder.relative(where)
                     if not where.startswith("not written") else where
                     for name, where in {**links, "summary": str(n.where / "summary.json"),
                                         "index": str(folder.index)}.items()}
    try:
        saved, lost = store.save(folder.root,
                                 lambda fresh: store.merge(n.started, mine, fresh),
                                 o.config, o.target)
    except MibenchError as e:
        summary.promoted = False
        summary.notes.insert(0, f"**The index was not saved** ({e}): this night is not in "
                                "the history and the baseline did not move")
        _write_summary(n.where, summary)
        raise
    if summary.promoted and (saved.baseline is None or saved.baseline.run_id
                             != mine.baseline.run_id):
        summary.promoted = False
    summary.notes += lost
    text = _write_summary(n.where, summary)
    return NightResult(summary, text, n.where)


def _write_summary(where: Path, summary: NightSummary) -> str:
    text = render(summary)
    write_output(where / "summary.md", text, "the summary")
    write_artifact(summary, where / "summary.json")
    return text

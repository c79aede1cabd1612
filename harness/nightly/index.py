"""The history folder of a nightly job and its index (records/nightly.py): where things
live in the folder, reading and writing the index (atomically, after each night), the
baseline's run, and accepting a known regression (`mibench accept`).

    HISTORY/index.json             mibench.nightly/1
    HISTORY/runs/*.json            every run (seeds and nights): `mibench history HISTORY/runs`
    HISTORY/ab/*.json              the A/B runs that confirmed or disproved a suspicion
    HISTORY/nights/<time>-<sha>/   summary.md, summary.json, report.md, history.md (+ plots)
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path

from mibench.errors import MibenchError

from ..records import RunRecord, read_artifact
from ..records.io import write_artifact
from ..records.nightly import (
    INDEX_FILE,
    Acceptance,
    Baseline,
    Known,
    NightlyIndex,
    read_index,
)
from ..util import now


@dataclasses.dataclass(frozen=True)
class Folder:
    """A nightly history folder's places."""

    root: Path

    @property
    def index(self) -> Path:
        return self.root / INDEX_FILE

    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def ab(self) -> Path:
        return self.root / "ab"

    def night(self, stamp: str, commit: str) -> Path:
        return self.root / "nights" / f"{stamp}-{commit[:12]}"

    def relative(self, path: str | Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)


def load_index(folder: Folder, config: str, target: str) -> NightlyIndex:
    """The folder's index, or a new one (no baseline: the first night seeds it); an index
    of another config or target is a MibenchError (one history folder per job)."""
    if not folder.index.exists():
        if folder.root.exists() and not folder.root.is_dir():
            raise MibenchError("is not a folder", field=str(folder.root))
        return NightlyIndex(config=config, target=target)
    index = read_index(folder.index)
    if index.config != config or index.target != target:
        raise MibenchError(f"holds the nightly history of config {index.config!r} "
                           f"({index.target}), not {config!r} ({target}): give each nightly "
                           "job a history folder of its own", field=str(folder.root))
    return index


def save_index(folder: Folder, index: NightlyIndex) -> None:
    write_artifact(index, folder.index)


def baseline_run(folder: Folder, baseline: Baseline) -> RunRecord:
    """The baseline's run artifact; a MibenchError naming it (and `--reseed`) when it is
    gone from the folder."""
    path = folder.root / baseline.artifact
    if not path.is_file():
        raise MibenchError(f"the baseline run {baseline.run_id} is not in the history any "
                           "more (deleted or moved); restore it, or start a new baseline "
                           "with `mibench nightly CONFIG --history DIR --reseed`",
                           field=str(path))
    return read_artifact(path)


def accept(folder: Folder, case_globs: list[str], by: str, why: str) -> list[Known]:
    """Mark the open known regressions of the matching cases accepted by `by` because
    `why`, and make the latest confirming night's run and commit among them the baseline
    (as a rebaseline: later nights judge those cases from their accepted level); the
    accepted entries. A MibenchError when none matches or `by`/`why` is empty."""
    for flag, value in (("--by", by), ("--why", why)):
        if not value.strip():
            raise MibenchError("must say who accepts it and why (not empty)", field=flag)
    if not folder.index.exists():
        raise MibenchError("holds no nightly index (index.json): nothing to accept",
                           field=str(folder.root))
    index = read_index(folder.index)
    chosen = [k for k in index.open_known()
              if any(fnmatch.fnmatchcase(k.case_id, g) for g in case_globs)]
    if not chosen:
        known = ", ".join(sorted({k.case_id for k in index.open_known()})) or "none"
        raise MibenchError(f"matches no open known regression (open: {known})",
                           field="--case")
    at = now()
    for k in chosen:
        k.status, k.accepted = "accepted", Acceptance(by=by.strip(), why=why.strip(), at=at)
    latest = chosen[-1]
    night = next((n for n in reversed(index.nights) if latest.level_run in n.runs), None)
    index.baseline = Baseline(
        commit=latest.bad, subject=night.subject if night else "", run_id=latest.level_run,
        artifact=f"runs/{latest.level_run}.json", since=at,
        reason=f"accepted by {by.strip()}: {why.strip()}")
    save_index(folder, index)
    return chosen

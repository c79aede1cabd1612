"""The history folder of a nightly job and its index (records/nightly.py): where things
live in the folder, the baseline's run, and accepting a known regression or an
improvement (`mibench accept`), a transaction of its own (nightly/store.py).

    HISTORY/index.json             mibench.nightly/2
    HISTORY/runs/*.json            every run (seeds and nights): `mibench history HISTORY/runs`
    HISTORY/ab/*.json              the A/B runs that confirmed or disproved a suspicion
    HISTORY/nights/<time>-<sha>/   summary.md, summary.json, report.md, history.md (+ plots)
"""

from __future__ import annotations

import dataclasses
import fnmatch
from pathlib import Path

from mibench.errors import MibenchError
from mibench.files import nearby_if_absent

from ..records import RunRecord, read_artifact
from ..records.nightly import (
    INDEX_FILE,
    Acceptance,
    Baseline,
    NightlyIndex,
    Regression,
)
from ..util import now
from . import store


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

    def run_path(self, run_id: str) -> Path:
        return self.runs / f"{run_id}.json"

    def relative(self, path: str | Path) -> str:
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)


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


def acceptable(index: NightlyIndex) -> list[Regression]:
    """What `accept` takes: open known regressions and confirmed improvements that wait."""
    return [r for r in index.regressions if r.status == "confirmed"]


def accept(folder: Folder, case_globs: list[str], by: str, why: str) -> list[Regression]:
    """Mark the open known regressions (and confirmed improvements waiting for it) of the
    matching cases accepted by `by` because `why`, and make the latest confirming night's
    run and commit among them the baseline (as a rebaseline: later nights judge those
    cases from their accepted level); the accepted entries. A MibenchError when none
    matches or `by`/`why` is empty. One transaction: a night running meanwhile keeps it."""
    for flag, value in (("--by", by), ("--why", why)):
        if not value.strip():
            raise MibenchError("must say who accepts it and why (not empty)", field=flag)
    if not folder.index.exists():
        raise MibenchError("holds no nightly index (index.json): nothing to accept"
                           f"{nearby_if_absent(folder.root)}", field=str(folder.root))
    chosen: list[Regression] = []

    def change(index: NightlyIndex):
        found = [r for r in acceptable(index)
                 if any(fnmatch.fnmatchcase(r.case_id, g) for g in case_globs)]
        if not found:
            known = ", ".join(sorted({r.case_id for r in acceptable(index)})) or "none"
            raise MibenchError(f"matches no open known regression or confirmed improvement "
                               f"(open: {known})", field="--case")
        at = now()
        for r in found:
            r.accepted = Acceptance(by=by.strip(), why=why.strip(), at=at)
            r.moved("accepted", at, r.bad, f"by {by.strip()}: {why.strip()}")
        latest = found[-1]
        night = next((n for n in reversed(index.nights) if latest.level_run in n.runs), None)
        index.baseline = Baseline(
            commit=latest.bad, subject=night.subject if night else "",
            run_id=latest.level_run, artifact=folder.relative(folder.run_path(latest.level_run)),
            since=at, reason=f"accepted by {by.strip()}: {why.strip()}")
        chosen.extend(found)
        return index, []

    store.save(folder.root, change, *_job(folder))
    return chosen


def _job(folder: Folder) -> tuple[str, str]:
    """The config and target the folder's index is of (what `accept` reads it as)."""
    from ..records.nightly import read_index

    index = read_index(folder.index)
    return index.config, index.target

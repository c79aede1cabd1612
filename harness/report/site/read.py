"""A nightly history folder read for the site (docs/nightly.md, "What the history keeps"):
its index (`mibench.nightly/2`), its runs, its A/B runs and the files of its nights. A
damaged run or A/B file is left out with a line, as the nightly does; an index that
cannot be read is the one error (the folder is not a nightly history).

    HISTORY/index.json, HISTORY/runs/*.json, HISTORY/ab/*.json,
    HISTORY/nights/<time>-<sha>/ (summary.md, summary.json, report.md, history.md, plots)
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from mibench.errors import MibenchError
from mibench.files import nearby_if_absent

from ...records import ABRecord, RunRecord, read_ab, read_artifact
from ...records.nightly import INDEX_FILE, NightlyIndex, read_index

REPORT_FILES = (".md", ".png", ".json")  # what of a night's folder the site copies


@dataclasses.dataclass(frozen=True)
class Job:
    """One history folder (one nightly job): `slug` names its folder in the site."""

    root: Path
    slug: str
    index: NightlyIndex
    runs: list[RunRecord]
    ab: list[tuple[str, ABRecord]]  # (path relative to the folder, the record)
    files: frozenset[str]  # the nights' files, relative to the folder
    notes: list[str]  # what was left out, one line each

    @property
    def config(self) -> str:
        return self.index.config


def read_job(root: Path, taken: set[str]) -> Job:
    """The history folder at `root`; `taken`: the slugs of the folders read before it."""
    root = Path(root)
    if not (root / INDEX_FILE).is_file():
        raise MibenchError("holds no nightly index (index.json): not a nightly history "
                           "folder (`mibench nightly CONFIG --history DIR` makes one)"
                           f"{nearby_if_absent(root)}", field=str(root))
    index = read_index(root / INDEX_FILE)
    notes: list[str] = []
    runs = [r for _, r in _read_all(root / "runs", read_artifact, notes)]
    ab = [(f"ab/{p.name}", r) for p, r in _read_all(root / "ab", read_ab, notes)]
    nights = root / "nights"
    files = frozenset(str(p.relative_to(root)) for p in nights.rglob("*")
                      if p.is_file() and p.suffix in REPORT_FILES) if nights.is_dir() \
        else frozenset()
    return Job(root=root, slug=slug(index.config, taken), index=index, runs=runs, ab=ab,
               files=files, notes=notes)


def _read_all(folder: Path, read, notes: list[str]) -> list[tuple[Path, object]]:
    out, seen = [], set()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = read(path)
        except MibenchError as e:
            notes.append(f"left out: {folder.name}/{path.name} is damaged ({e.message})")
            continue
        if record.run_id in seen:  # a copy of a run: one run is one point
            notes.append(f"left out: {folder.name}/{path.name} is a copy of run "
                         f"{record.run_id}")
            continue
        seen.add(record.run_id)
        out.append((path, record))
    return out


def slug(name: str, taken: set[str]) -> str:
    """A file-safe name for `name`, not in `taken` (which it joins)."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "history"
    out, k = base, 2
    while out in taken:
        out, k = f"{base}-{k}", k + 1
    taken.add(out)
    return out

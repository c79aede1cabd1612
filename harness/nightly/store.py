"""The history folder as a store nothing can lose (docs/nightly.md, "What the history keeps").

- **One night at a time.** A night holds `HISTORY/.night.lock` (a `filelock` lock: an
  advisory flock the kernel lets go of when its holder dies, even by SIGKILL, so no stale
  lock outlives a killed night) from its start to its end, and writes who holds it (pid,
  host, since, command) beside it; a second night on the folder is refused at its start
  with one line naming the holder and exit code `HELD_EXIT`.
- **Transactions.** Every read-modify-write of the index (a night's save, `accept`) holds
  `HISTORY/.index.lock` for the write only, never for the night: the night merges what it
  changed into the index as it stands at save time (`merge`), so an `accept` made during the
  night survives it. The index is written whole or not at all (a temporary file, fsynced,
  renamed); a write that fails is exit 4 naming the file, and the index stays as it was.
- **Confinement.** Every path and run id an index holds stays inside the folder: an entry
  that points outside (`../x`, an absolute path) is refused with one line.
- **Runs checked first.** `runs/` is read before the night's run: a damaged file is one
  line, and the night goes on without it (it would otherwise fail every later night).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

from mibench.errors import EnvironmentFailed, MibenchError

from ..records import RunRecord
from ..records.io import why_not_written, write_atomic
from ..records.nightly import INDEX_FILE, NightlyIndex, read_index
from ..util import now

HELD_EXIT = 6  # another night holds the history folder
NIGHT_LOCK, INDEX_LOCK, HOLDER = ".night.lock", ".index.lock", ".night.holder.json"
INDEX_WAIT_S = 120.0  # how long a save waits for another writer of the index


class FolderHeld(MibenchError):
    """Another night holds the history folder (exit HELD_EXIT)."""

    exit_code = HELD_EXIT


@contextlib.contextmanager
def night_lock(root: Path, command: str = "") -> Iterator[None]:
    """Hold the folder's night lock for a whole night; FolderHeld naming the holder when
    another night has it."""
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / NIGHT_LOCK), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise FolderHeld(f"another night holds this history folder ({holder(root)}); let it "
                         "finish, or give this job a history folder of its own",
                         field=str(root)) from None
    try:
        with contextlib.suppress(OSError):  # who holds it: a courtesy, not the lock
            write_atomic(root / HOLDER, json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "since": now(),
                "command": command or " ".join(sys.argv)}))
        yield
    finally:
        with contextlib.suppress(OSError):
            (root / HOLDER).unlink(missing_ok=True)
        lock.release()


def holder(root: Path) -> str:
    """`pid 123 on host h since T: mibench nightly ...`, as the holder wrote it."""
    try:
        h = json.loads((root / HOLDER).read_text())
        return f"pid {h['pid']} on {h['host']} since {h['since']}: {h['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not said who it is yet"


@contextlib.contextmanager
def index_lock(root: Path, wait_s: float = INDEX_WAIT_S) -> Iterator[None]:
    """Hold the index's lock for one read-modify-write."""
    from filelock import FileLock, Timeout

    root.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(str(root / INDEX_LOCK), timeout=wait_s):
            yield
    except Timeout:
        raise MibenchError(f"the index is being written by another mibench process "
                           f"({INDEX_LOCK} held for {wait_s:.0f} s); try again",
                           field=str(root / INDEX_FILE)) from None


def read(root: Path, config: str, target: str) -> NightlyIndex:
    """The folder's index (or a new one when it has none), its entries confined to the
    folder; a MibenchError for an index of another config or target."""
    path = root / INDEX_FILE
    if not path.exists():
        if root.exists() and not root.is_dir():
            raise MibenchError("is not a folder", field=str(root))
        return NightlyIndex(config=config, target=target)
    index = read_index(path)
    if index.config != config or index.target != target:
        raise MibenchError(f"holds the nightly history of config {index.config!r} "
                           f"({index.target}), not {config!r} ({target}): give each nightly "
                           "job a history folder of its own", field=str(root))
    confine(index, path)
    return index


def confine(index: NightlyIndex, path: Path) -> None:
    """Refuse an index whose paths or run ids point outside its folder."""
    entries = []
    if index.baseline is not None:
        entries += [("baseline.artifact", index.baseline.artifact, True),
                    ("baseline.run_id", index.baseline.run_id, False)]
    entries += [(f"nights.{i}.summary", n.summary, True) for i, n in enumerate(index.nights)
                if n.summary]
    entries += [(f"nights.{i}.runs", r, False) for i, n in enumerate(index.nights)
                for r in n.runs]
    for i, r in enumerate(index.regressions):
        entries += [(f"regressions.{i}.{name}", value, False)
                    for name, value in (("level_run", r.level_run), ("evidence_run",
                                                                      r.evidence_run),
                                        ("id", r.id)) if value]
    for key, value, is_path in entries:
        if not inside(value, is_path):
            raise MibenchError(f"{key} {value!r} points outside the history folder; an "
                               "index refers to files inside its own folder only",
                               field=str(path))


def inside(value: str, is_path: bool) -> bool:
    """A relative path that stays in the folder (`is_path`), or a plain file name (a run
    id, which becomes `runs/<id>.json`)."""
    if not value or "\0" in value or "\\" in value:
        return False
    p = PurePosixPath(value)
    if is_path:
        return not p.is_absolute() and ".." not in p.parts
    return "/" not in value and value not in (".", "..")


def merge(started: NightlyIndex, mine: NightlyIndex, fresh: NightlyIndex
          ) -> tuple[NightlyIndex, list[str]]:
    """The index as it stands (`fresh`) with what the night changed (`mine`, from
    `started`, the index it read at its start): its nights appended, its new and changed
    regressions, its baseline. What another writer changed meanwhile (an `accept`) wins
    where both changed the same thing, and the lines say what of the night's was not kept."""
    out, notes = fresh.model_copy(deep=True), []
    out.nights += mine.nights[len(started.nights):]
    before = {r.id: r for r in started.regressions}
    for r in mine.regressions:
        old, now_ = before.get(r.id), out.find(r.id)
        if old is not None and r == old:
            continue  # the night left it as it was
        if now_ is None:
            out.regressions.append(r.model_copy(deep=True))
        elif old is not None and now_ == old:
            out.regressions[out.regressions.index(now_)] = r.model_copy(deep=True)
        else:
            notes.append(f"{r.case_id}: kept as {now_.status} by another writer during the "
                         f"night (this night had it {r.status})")
    if mine.baseline != started.baseline:
        if fresh.baseline == started.baseline:
            out.baseline = mine.baseline
        else:
            notes.append(f"not promoted: the baseline changed during the night "
                         f"({fresh.baseline.reason if fresh.baseline else 'removed'})")
    out.migrated_from = None
    return out, notes


def save(root: Path, change: Callable[[NightlyIndex], tuple[NightlyIndex, list[str]]],
         config: str, target: str) -> tuple[NightlyIndex, list[str]]:
    """Under the index lock: read the index as it stands, apply `change`, write it whole
    (an older version's file kept beside it, once); exit 4 naming the file when the write
    fails (the index is as it was)."""
    path = root / INDEX_FILE
    with index_lock(root):
        fresh = read(root, config, target)
        index, notes = change(fresh)
        try:
            if fresh.migrated_from is not None:
                name = fresh.migrated_from.removeprefix("mibench.").replace("/", "-")
                old = root / f"index.{name}.json"  # index.nightly-1.json
                if not old.exists():
                    write_atomic(old, path.read_bytes())
            index.migrated_from = None
            write_atomic(path, index.to_json())
        except OSError as e:
            raise EnvironmentFailed(f"cannot write the index: {why_not_written(e)}; it is as "
                                    "it was before (nothing of this change was recorded)",
                                    field=str(path)) from None
    return index, notes


def runs(folder: Path, note: Callable[[str], None]) -> tuple[list[RunRecord], list[str]]:
    """Every run artifact in `runs/` (one record per run id) and a line for each file that
    is damaged (left out, the night goes on) or a copy of a run already read."""
    from ..records import read_artifact

    read, lines = [], []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            read.append((path, read_artifact(path)))
        except MibenchError as e:
            lines.append(f"left out: {path.name} is damaged ({e.message})")
    # the file named after its run id is the run; any other with that id is a copy
    read.sort(key=lambda pr: pr[0].stem != pr[1].run_id)
    records, seen = [], {}
    for path, record in read:
        if record.run_id in seen:
            lines.append(f"left out: {path.name} is a copy of run {record.run_id} "
                         f"({seen[record.run_id]}): one run is one point")
            continue
        seen[record.run_id] = path.name
        records.append(record)
    for line in lines:
        note(f"nightly: {line}")
    return records, lines

"""One run is one point: an artifact read twice (a copied file, the same bytes under another
name, the same run id written again) counts once in history, the noise floor and export,
and a line says which file was left out and which one it repeats. Otherwise a copy would be
an extra point of its series, and a run with its copy an A/A pair of no spread: a 0% noise
floor."""

from __future__ import annotations

from pathlib import Path

from ..records import RunRecord


def unique_runs(records: list[RunRecord], names: list[str | Path | None] | None = None
                ) -> tuple[list[RunRecord], list[str]]:
    """`records` with each run id once, and a line per artifact left out. `names`: where
    each record was read from (a path; None: not a file): a file named after its run id
    is the one kept, else the first."""
    names = [None if n is None else str(n) for n in names or [None] * len(records)]
    kept: dict[str, int] = {}  # run id -> its place in `out`
    out: list[tuple[RunRecord, str | None]] = []
    lines = []
    for record, name in zip(records, names, strict=True):
        at = kept.get(record.run_id)
        if at is None:
            kept[record.run_id] = len(out)
            out.append((record, name))
            continue
        first = out[at][1]
        if name and first and Path(name).stem == record.run_id != Path(first).stem:
            out[at], (name, first) = (record, name), (first, name)
        lines.append(_line(record.run_id, name, first))
    return [r for r, _ in out], lines


def _line(run_id: str, name: str | None, first: str | None) -> str:
    """`skipped b.json: the same bytes as a.json (one run is one point)`."""
    if name is None or first is None:
        return f"skipped a second artifact of run {run_id} (one run is one point)"
    same = _bytes(name) is not None and _bytes(name) == _bytes(first)
    how = "the same bytes as" if same else f"run {run_id} again, already read from"
    return f"skipped {name}: {how} {first} (one run is one point)"


def _bytes(path: str) -> bytes | None:
    try:
        return Path(path).read_bytes()
    except OSError:
        return None

"""What a job that measures rows leaves in its `--out` folder: `STEM.json` (the result,
indented) and `STEM.md` (its Markdown table), each ending in a newline."""

from __future__ import annotations

import json
from pathlib import Path


def save(out: Path | None, stem: str, result: dict, table: str) -> None:
    """Write `result` and `table` under `out` (made if missing); nothing when `out` is None."""
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / f"{stem}.md").write_text(table + "\n")

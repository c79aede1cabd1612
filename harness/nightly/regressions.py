"""`mibench regressions HISTORY`: the regressions a nightly history records, newest first,
each with its life cycle (records/nightly.py `Regression`), as text or as JSON
(`mibench.regressions/1`: the index's config, target and baseline, and its regressions
as the index holds them)."""

from __future__ import annotations

import json
from pathlib import Path

from mibench.errors import MibenchError
from mibench.files import nearby_if_absent

from ..records.nightly import INDEX_FILE, REGRESSIONS_SCHEMA, Regression, read_index

STATUSES = ("suspected", "confirmed", "disproved", "accepted", "fixed")


def listing(history: Path, fmt: str, statuses: list[str]) -> str:
    """The text or JSON listing of the folder's regressions (only `statuses`, if any)."""
    if fmt not in ("text", "json"):
        raise MibenchError(f"must be text or json, got {fmt!r}", field="--format")
    for s in statuses:
        if s not in STATUSES:
            raise MibenchError(f"{s!r} is not one of {', '.join(STATUSES)}", field="--status")
    path = Path(history) / INDEX_FILE
    if not path.is_file():
        raise MibenchError("holds no nightly index (index.json): no regressions recorded"
                           f"{nearby_if_absent(history)}", field=str(history))
    index = read_index(path)
    chosen = [r for r in reversed(index.regressions) if not statuses or r.status in statuses]
    if fmt == "json":
        return json.dumps({"schema": REGRESSIONS_SCHEMA, "config": index.config,
                           "target": index.target,
                           "baseline": index.baseline.model_dump(mode="json")
                           if index.baseline else None,
                           "regressions": [r.model_dump(mode="json") for r in chosen]},
                          indent=1) + "\n"
    if not chosen:
        return f"{index.config}: no regressions recorded" + (
            f" with status {', '.join(statuses)}" if statuses else "") + "\n"
    return "\n".join(block(r) for r in chosen)


def block(r: Regression) -> str:
    """A regression in a few lines: status, case, change; culprit; who accepted it; fixed
    where; the command that shows it again; its life cycle."""
    what = "improvement" if r.kind == "improvement" else "regression"
    change = (f"{r.change:+.1%}" + (f" [{r.low:+.1%}, {r.high:+.1%}]" if r.low is not None
                                    else "")) if r.change is not None else "-"
    lines = [f"{r.status:<10} {what} {r.case_id}: {change} ({r.source or 'no figure'}; "
             f"{r.verdict or '-'})  id {r.id}",
             f"  judged against {r.good[:12]} at {r.bad[:12]}"]
    for c in r.culprits:
        part = " (part of the change)" if c.partial else ""
        lines.append(f"  culprit {c.commit[:12]} {c.subject!r}{part}")
    if r.kind == "regression" and r.status != "suspected" and r.status != "disproved" \
            and not r.culprits:
        lines.append(f"  culprit: none named ({r.bisect or 'not bisected'})")
    elif r.bisect:
        lines.append(f"  how: {r.bisect}")
    if r.accepted is not None:
        lines.append(f"  accepted by {r.accepted.by} on {r.accepted.at[:10]}: {r.accepted.why}")
    if r.fixed_at:
        lines.append(f"  fixed at {r.fixed_at[:12]}: {r.fix}")
    if r.reproduce:
        lines.append(f"  reproduce: {r.reproduce}")
    if r.events:
        lines.append("  life: " + "; ".join(f"{e.at[:10]} {e.status}"
                                             + (f" at {e.commit[:12]}" if e.commit else "")
                                             for e in r.events))
    return "\n".join(lines) + "\n"

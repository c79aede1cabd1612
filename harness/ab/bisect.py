"""`mibench bisect`: the first commit on BAD's first-parent line after GOOD whose A/B run
against GOOD is a regression (binary search, as asv's `find`, with the paired test)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError
from mibench.harness.ab.revisions import first_parent
from mibench.harness.ab.rounds import run_ab
from mibench.harness.ab.servers import revision_side, run_server_ab
from mibench.harness.config import Config
from mibench.harness.util import git


def bisect(config: Config, repo: Path, good: str, bad: str, cache: Path, *,
           case_glob: list[str] | str | None, rounds: int = 5, servers: bool = False,
           note: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict:
    """{first_bad, subject, steps: [{commit, subject, verdict, evidence}]}; a MibenchError
    when BAD shows no regression against GOOD (nothing to search). `servers`: `repo` is a
    server's repository and each step is an A/B of its launched servers
    (ab/servers.py)."""
    commits = first_parent(repo, good, bad)
    if not commits:
        raise MibenchError(f"has no commits after {good} on its first-parent line",
                           field="BAD_REV")
    steps: list[dict] = []

    def regressed(commit: str) -> bool:
        if servers:
            sides = {"base": revision_side(repo, good, cache),
                     "new": revision_side(repo, commit, cache)}
            record, _ = run_server_ab(config, sides, rounds=rounds, case_globs=case_glob,
                                      note=lambda line: None)
        else:
            record, _ = run_ab(config, repo, good, commit, cache, rounds=rounds,
                               case_glob=case_glob, note=lambda line: None)
        evidence = {c.case_id: f"{c.verdict}: {c.why}" for c in record.cases}
        step = {"commit": commit, "subject": git(repo, "log", "-1", "--format=%s", commit),
                "verdict": record.verdict, "evidence": evidence}
        steps.append(step)
        note(f"step {len(steps)}: {commit[:12]} {step['subject']!r}: {record.verdict}")
        for case_id, line in evidence.items():
            note(f"    {case_id}: {line}")
        return record.verdict == "regression"

    if not regressed(commits[-1]):
        raise MibenchError(f"shows no regression against {good} in the selected cases: "
                           "nothing to bisect", field=bad)
    lo, hi = 0, len(commits) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if regressed(commits[mid]):
            hi = mid
        else:
            lo = mid + 1
    first = next(s for s in steps if s["commit"] == commits[lo])
    return {"first_bad": commits[lo], "subject": first["subject"], "evidence":
            first["evidence"], "steps": steps, "candidates": len(commits)}

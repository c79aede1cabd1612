"""`mibench bisect`: the first commit on BAD's first-parent line after GOOD whose A/B run
against GOOD is a regression (binary search, as asv's `find`, with `ab`'s paired test).

Each step takes `ab`'s own per-case verdicts (ab/rounds.case_verdict, the words `ab`
prints): a commit is bad when a case is a `regression`, good when every case is
`unchanged` or an `improvement`, and undecided otherwise (an interval that reaches beyond
the minimum effect is `inconclusive`; too few rounds or a failing base is `untested`). An
undecided step is measured again with twice the rounds while that stays within
`max_rounds`; one still undecided ends the search without naming a commit, saying what
would decide it: a search on undecided evidence can name the wrong commit.

The nightly (harness/nightly/) bisects within a time budget: `afford(rounds)` says why an
A/B of that many rounds may not start (None: it may), and a step it stops ends the search
like an undecided one; `bad_step` is BAD's A/B against GOOD already measured (the night's
confirmation), so BAD is not measured again.
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..config import Config
from ..util import git
from .revisions import first_parent
from .rounds import case_verdict, run_ab
from .servers import revision_side, run_server_ab

BAD, GOOD, UNDECIDED = "regression", "no regression", "inconclusive"
CLEAR = ("unchanged", "improvement")  # ab's case verdicts that clear a commit


def step_verdict(case_verdicts: list[str]) -> str:
    """A commit's verdict from `ab`'s case verdicts: `regression` when one case regressed,
    `no regression` when every case is unchanged or improved, else `inconclusive`."""
    if BAD in case_verdicts:
        return BAD
    if case_verdicts and all(v in CLEAR for v in case_verdicts):
        return GOOD
    return UNDECIDED


@dataclasses.dataclass(frozen=True)
class Search:
    """What one bisect measures: the config, the repository, GOOD, where A/B runs cache
    their worktrees, the case globs, the rounds of a step and the most rounds a step may
    take (`max_rounds`), and whether `repo` is a server's repository (ab/servers.py)."""

    config: Config
    repo: Path
    good: str
    cache: Path
    case_glob: list[str] | str | None
    rounds: int = 5
    max_rounds: int | None = None
    servers: bool = False
    afford: Callable[[int], str | None] | None = None  # why an A/B may not start, or None

    @property
    def budget(self) -> int:
        """The most rounds one step may take (None: 4 x `rounds`)."""
        return max(self.rounds, self.max_rounds if self.max_rounds is not None
                   else 4 * self.rounds)

    def ab(self, commit: str, rounds: int):
        if self.servers:
            sides = {"base": revision_side(self.repo, self.good, self.cache),
                     "new": revision_side(self.repo, commit, self.cache)}
            record, _ = run_server_ab(self.config, sides, rounds=rounds,
                                      case_globs=self.case_glob, note=lambda line: None)
        else:
            record, _ = run_ab(self.config, self.repo, self.good, commit, self.cache,
                               rounds=rounds, case_glob=self.case_glob,
                               note=lambda line: None)
        return record

    def step(self, commit: str, note: Callable[[str], None]) -> dict:
        """A/B runs of `commit` against GOOD until decided or out of rounds: the last one's
        {commit, subject, verdict, rounds, evidence: {case_id: 'verdict: why'}, stopped}
        (`stopped`: why the budget stopped it before it was decided, else None)."""
        rounds, limit = self.rounds, self.budget
        subject = git(self.repo, "log", "-1", "--format=%s", commit)
        record, stopped = None, None
        while True:
            stopped = self.afford(rounds) if self.afford is not None else None
            if stopped is not None:
                break
            record = self.ab(commit, rounds)
            verdicts = {c.case_id: case_verdict(c) for c in record.cases}
            verdict = step_verdict(list(verdicts.values()))
            if verdict != UNDECIDED or rounds * 2 > limit:
                break
            note(f"    {commit[:12]}: {verdict} at {rounds} rounds; again with {rounds * 2}")
            rounds *= 2
        if record is None:
            return {"commit": commit, "subject": subject, "verdict": UNDECIDED, "rounds": 0,
                    "evidence": {}, "stopped": stopped}
        return {"commit": commit, "subject": subject, "verdict": verdict,
                "rounds": rounds, "stopped": stopped,
                "evidence": {c.case_id: f"{verdicts[c.case_id]}: {c.why}"
                             for c in record.cases}}


def bisect(config: Config, repo: Path, good: str, bad: str, cache: Path, *,
           case_glob: list[str] | str | None, rounds: int = 5, max_rounds: int | None = None,
           servers: bool = False, afford: Callable[[int], str | None] | None = None,
           bad_step: dict | None = None,
           note: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict:
    """{verdict, first_bad, subject, evidence, steps, candidates, undecided, decide}.

    `verdict` is `found` (`first_bad` and `subject` name the commit, `evidence` its case
    lines) or `inconclusive` (`first_bad` None; `undecided` is the step that stayed
    undecided within `max_rounds`, and `decide` says what would decide it). Each of `steps`
    is {commit, subject, verdict, rounds, evidence}. A MibenchError when BAD is clearly no
    regression against GOOD (nothing to search). `servers`: `repo` is a server's repository
    and each step is an A/B of its launched servers (ab/servers.py). `afford` and
    `bad_step`: see the module docstring (a search the budget stopped has `stopped`, the
    reason, and `decide`)."""
    commits = first_parent(repo, good, bad)
    if not commits:
        raise MibenchError(f"has no commits after {good} on its first-parent line",
                           field="BAD_REV")
    search = Search(config, repo, good, cache, case_glob, rounds, max_rounds, servers, afford)
    steps: list[dict] = []

    def verdict_of(commit: str) -> str:
        known = bad_step if bad_step is not None and commit == commits[-1] else None
        step = known or search.step(commit, note)
        steps.append(step)
        note(f"step {len(steps)}: {commit[:12]} {step['subject']!r}: {step['verdict']} "
             f"({step['rounds']} rounds)")
        for case_id, line in step["evidence"].items():
            note(f"    {case_id}: {line}")
        return step["verdict"]

    result = {"verdict": UNDECIDED, "first_bad": None, "subject": None, "evidence": {},
              "steps": steps, "candidates": len(commits), "undecided": None, "decide": None,
              "stopped": None}
    first = verdict_of(commits[-1])
    if first == GOOD:
        raise MibenchError(f"shows no regression against {good} in the selected cases: "
                           "nothing to bisect", field=bad)
    lo, hi = 0, len(commits) - 1
    while first == BAD and lo < hi:
        mid = (lo + hi) // 2
        found = verdict_of(commits[mid])
        if found == UNDECIDED:
            break
        hi, lo = (mid, lo) if found == BAD else (hi, mid + 1)
    if steps[-1]["verdict"] == UNDECIDED:
        result["undecided"] = steps[-1]
        result["stopped"] = steps[-1].get("stopped")
        result["decide"] = what_decides(search, steps[-1], bad)
        return result
    named = next(s for s in steps if s["commit"] == commits[lo])
    result.update(verdict="found", first_bad=commits[lo], subject=named["subject"],
                  evidence=named["evidence"])
    return result


def what_decides(search: Search, step: dict, bad: str) -> str:
    """The line that says what would decide an undecided step: more rounds (the command
    with a larger budget) or a quieter machine."""
    more = max(step["rounds"], search.budget) * 4
    globs = [search.case_glob] if isinstance(search.case_glob, str) else search.case_glob or []
    cases = " ".join(f"--case {shlex.quote(g)}" for g in globs)
    config = shlex.quote(search.config._source or "CONFIG")
    return (f"more rounds on a quiet machine would decide it: mibench ab {search.good[:12]} "
            f"{step['commit'][:12]} {config} {cases} --rounds {more}, or mibench bisect "
            f"{search.good[:12]} {shlex.quote(bad)} {config} {cases} --max-rounds {more}")

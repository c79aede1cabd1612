"""`mibench bisect`: the commit(s) on BAD's first-parent line after GOOD that made the
change BAD shows against GOOD, found by the level each step sits at.

1. **BAD's level.** BAD is measured against GOOD (`ab`, paired rounds; the nightly passes
   its confirmation's rounds instead) until its interval shows it slower than the threshold
   and settled (harness/stats/sequential.py `settled`): that is the change searched for.
   BAD clearly within the threshold of GOOD: nothing to bisect (a MibenchError).
2. **What cannot matter is not measured.** A commit whose measured code (`engines/`, all a
   revision's worker takes from its checkout; a server's whole tree) is byte-identical to
   its parent's sits at its parent's level: only the commits that change it are candidates,
   and a candidate whose code is identical to a commit already measured (GOOD and BAD
   included: a revert) takes its rounds. One candidate: it is named without a run.
3. **Binary search by level.** Each candidate step is an `ab` of the commit against GOOD,
   judged by stats/sequential.py: `regression` (near BAD's level), `no regression` (near
   GOOD's), `partial` (surely between the two: the search splits there and names a commit
   on each side), or undecided: more rounds are added at the next look (r, 2r, 4r, ... up to
   `max_rounds`) while `afford` allows; a step still undecided ends the search without
   naming a commit, saying what would decide it.

The threshold reaches every step: it is `ab`'s minimum effect and the margin a partial step
keeps off both levels. Each step is printed as it goes (`note`).
"""

from __future__ import annotations

import dataclasses
import shlex
import sys
from collections.abc import Callable
from pathlib import Path

from mibench.errors import MibenchError

from ..case_kinds import server_ab
from ..config import Config
from ..judge.paired import MIN_EFFECT
from ..util import git, git_output
from .revisions import first_parent
from .rounds import run_ab
from .search import MEASURED, Rounds, Searcher, search


@dataclasses.dataclass(frozen=True)
class Search:
    """What one bisect measures: the config, the repository, GOOD, where A/B runs cache
    their worktrees, the case globs, whether `repo` is a server's repository
    (under_test/ab.py) and the threshold (ab's minimum effect)."""

    config: Config
    repo: Path
    good: str
    cache: Path
    case_glob: list[str] | str | None
    servers: bool = False
    threshold: float = MIN_EFFECT

    def ab(self, commit: str, rounds: int, note: Callable[[str], None]):
        if self.servers:
            servers = server_ab()
            sides = {"base": servers.revision_side(self.repo, self.good, self.cache),
                     "new": servers.revision_side(self.repo, commit, self.cache)}
            record, _ = servers.run_server_ab(self.config, sides, rounds=rounds,
                                      case_globs=self.case_glob, note=note,
                                      min_effect=self.threshold)
        else:
            record, _ = run_ab(self.config, self.repo, self.good, commit, self.cache,
                               rounds=rounds, case_glob=self.case_glob, note=note,
                               min_effect=self.threshold)
        return record

    def measure(self, note: Callable[[str], None]):
        def run(commit: str, rounds: int) -> tuple[Rounds, dict[str, str]]:
            record = self.ab(commit, rounds, lambda line: note(f"    {line}"))
            return ({c.case_id: list(c.timing.round_log_ratios) if c.timing else []
                     for c in record.cases},
                    {c.case_id: f"{c.verdict}: {c.why}" for c in record.cases})
        return run

    def tree(self, commit: str) -> str:
        """The hash of the commit's measured code: `engines/` (a server: its whole tree)."""
        if not self.servers:
            found = git_output(self.repo, "rev-parse", f"{commit}:{MEASURED}")
            if found:
                return found.strip()
        return git(self.repo, "rev-parse", f"{commit}^{{tree}}")


def bisect(config: Config, repo: Path, good: str, bad: str, cache: Path, *,
           case_glob: list[str] | str | None, rounds: int = 5, max_rounds: int | None = None,
           servers: bool = False, afford: Callable[[int], str | None] | None = None,
           bad_rounds: Rounds | None = None, threshold: float = MIN_EFFECT,
           note: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> dict:
    """{verdict, first_bad, subject, culprits, evidence, steps, candidates, undecided,
    decide, stopped, skipped, method}.

    `verdict` is `found` (`first_bad` and `subject` name the first culprit, `culprits` every
    commit named, each {commit, subject, change: {case: change}, partial}, `evidence` the
    first one's case lines) or `inconclusive` (`first_bad` None; `undecided` is the step that
    stayed undecided, `decide` what would decide it, `stopped` the budget's reason when it
    stopped it). Each of `steps` is {commit, subject, verdict, rounds, evidence, stopped,
    same_as}. A MibenchError when BAD is clearly no regression against GOOD or has GOOD's
    measured code (nothing to search). `bad_rounds`: BAD's rounds against GOOD already
    measured (the nightly's confirmation), added to before BAD is measured again."""
    commits = first_parent(repo, good, bad)
    if not commits:
        raise MibenchError(f"has no commits after {good} on its first-parent line",
                           field="BAD_REV")
    most = max(rounds, max_rounds if max_rounds is not None else 4 * rounds)
    run = Search(config, repo, good, cache, case_glob, servers, threshold)
    s = Searcher(good=good, commits=commits, measure=run.measure(note), tree=run.tree,
                 subject=lambda c: git(repo, "log", "-1", "--format=%s", c), rounds=rounds,
                 most_rounds=most, threshold=threshold, afford=afford or (lambda r: None),
                 note=note)
    cases = _case_ids(config, case_glob)
    result = search(s, cases, bad_rounds)
    if result["verdict"] != "found":
        result["decide"] = what_decides(run, result["undecided"], bad, most)
    return result


def _case_ids(config: Config, case_glob) -> list[str]:
    from ..config import expand
    from ..config.matrix import select_cases

    return [c.case_id for c in select_cases(expand(config), case_glob)]


def what_decides(search: Search, step: dict, bad: str, most: int) -> str:
    """The line that says what would decide an undecided step: more rounds (the command
    with a larger budget) or a quieter machine."""
    more = max(step["rounds"], most) * 4
    globs = [search.case_glob] if isinstance(search.case_glob, str) else search.case_glob or []
    cases = " ".join(f"--case {shlex.quote(g)}" for g in globs)
    config = shlex.quote(search.config._source or "CONFIG")
    return (f"more rounds would decide it: mibench ab {search.good[:12]} "
            f"{step['commit'][:12]} {config} {cases} --rounds {more}, or mibench bisect "
            f"{search.good[:12]} {shlex.quote(bad)} {config} {cases} --max-rounds {more}")

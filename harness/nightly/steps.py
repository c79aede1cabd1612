"""The nightly's seam to the world: the repository's commits, one run of the config at
HEAD, an A/B of two commits, a bisect, the night's report and history. `RealSteps` does
them with mibench's own machinery; the tests of the loop's decisions pass a fake with the
same methods (harness/nightly/loop.py calls nothing else that measures or asks git).

A commit is a commit of `repo`: mibench's own engines by default (each revision's engines
run through the same per-revision bootstrap `ab` uses, from a cached worktree, so a
scratch clone's commits can be run without installing them), or a server's repository
(`server`: `--server-repo`; the config's launched servers run it, as `ab --server-repo`
does). The run records that checkout as its `engine_repo`, which history and the noise
floor take as the run's commit (harness.judge.comparable.code_git).
"""

from __future__ import annotations

import dataclasses
import glob
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from ..config import Config
from ..records import ABRecord
from ..util import git, git_output

SHOWN_NIGHTS = 60  # a night's history.md shows each series' last runs (plots stay cheap)


def globs_of(case_ids: list[str]) -> list[str]:
    """Globs that match exactly these case ids (`*`, `?`, `[` escaped)."""
    return [glob.escape(c) for c in case_ids]


@dataclasses.dataclass(frozen=True)
class RealSteps:
    """The nightly's steps on this machine. `config_path` and `sets` are what the config
    was loaded from (for the commands that reproduce a finding); `cases`: the run's
    `--case` globs; `progress`: the run's progress style (stderr)."""

    config: Config
    config_path: str
    repo: Path
    cache: Path
    server: bool = False
    sets: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()
    progress: str = "lines"
    threshold: float = 0.05
    note: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)

    # --- the repository ---------------------------------------------------------------
    def head(self) -> tuple[str, str]:
        from ..ab.revisions import resolve

        commit = resolve(self.repo, "HEAD")
        return commit, self.subject(commit)

    def subject(self, commit: str) -> str:
        return git(self.repo, "log", "-1", "--format=%s", commit)

    def reaches(self, commit: str) -> bool:
        return git_output(self.repo, "cat-file", "-e", f"{commit}^{{commit}}") is not None

    def descends(self, ancestor: str, commit: str) -> bool:
        """Whether `commit` descends from `ancestor` (a force-push breaks the line)."""
        done = subprocess.run(["git", "-C", str(self.repo), "merge-base", "--is-ancestor",
                               ancestor, commit], capture_output=True)
        return done.returncode == 0

    def commits(self, good: str, bad: str) -> list[str]:
        from ..ab.revisions import first_parent

        return first_parent(self.repo, good, bad)

    # --- measuring --------------------------------------------------------------------
    def run(self, out: Path) -> Path:
        """One run of the config at HEAD into `out`; the artifact's path."""
        from ..ab.revisions import checkout
        from ..run.plan import RunOptions, make_plan
        from ..run.runner import artifact_path, run

        root = None if self.server else checkout(self.repo, "HEAD", self.cache).root
        options = RunOptions(out=out, sets=self.sets, cases=self.cases, argv=sys.argv,
                             progress=self.progress, engine_repo=root or self.repo)
        plan = make_plan(self.config, options, self.config_path, engine_root=root)
        return artifact_path(run(plan), out)

    def ab(self, base: str, new: str, case_ids: list[str], rounds: int, out: Path
           ) -> ABRecord:
        """`ab` of the cases (exact ids) between two commits, its artifact under `out`."""
        from ..ab.rounds import run_ab
        from ..case_kinds import server_ab

        if self.server:
            servers = server_ab()
            sides = {"base": servers.revision_side(self.repo, base, self.cache),
                     "new": servers.revision_side(self.repo, new, self.cache)}
            record, _ = servers.run_server_ab(self.config, sides, rounds=rounds,
                                      case_globs=globs_of(case_ids), out=out, argv=sys.argv,
                                      min_effect=self.threshold, note=self.note)
            return record
        record, _ = run_ab(self.config, self.repo, base, new, self.cache, rounds=rounds,
                           case_glob=globs_of(case_ids), out=out, argv=sys.argv,
                           min_effect=self.threshold, note=self.note)
        return record

    def bisect(self, good: str, bad: str, case_ids: list[str], *, rounds: int,
               max_rounds: int, afford: Callable[[int], str | None],
               bad_rounds: dict[str, list[float]]) -> dict:
        from ..ab.bisect import bisect

        self.note(f"nightly: bisecting {len(case_ids)} case(s) between {good[:12]} and "
                  f"{bad[:12]}")
        return bisect(self.config, self.repo, good, bad, self.cache,
                      case_glob=globs_of(case_ids), rounds=rounds, max_rounds=max_rounds,
                      servers=self.server, afford=afford, bad_rounds=bad_rounds,
                      threshold=self.threshold, note=self.note)

    # --- what a person runs to see it again --------------------------------------------
    def ab_command(self, base: str, new: str, case_ids: list[str], rounds: int) -> str:
        return shlex.join(["mibench", "ab", base[:12], new[:12], self.config_path,
                           *self._common(case_ids), "--rounds", str(rounds)])

    def bisect_command(self, good: str, bad: str, case_ids: list[str],
                       max_rounds: int) -> str:
        return shlex.join(["mibench", "bisect", good[:12], bad[:12], self.config_path,
                           *self._common(case_ids), "--max-rounds", str(max_rounds)])

    def _common(self, case_ids: list[str]) -> list[str]:
        sets = [w for s in self.sets for w in ("--set", s)]
        server = ["--server-repo", str(self.repo)] if self.server else []
        return [*sets, *server, *[w for c in globs_of(case_ids) for w in ("--case", c)]]

    # --- the night's report and history ------------------------------------------------
    def reports(self, new: Path, baseline: Path | None, runs: Path, night: Path,
                evidence: str = "", history=None) -> dict[str, str]:
        """`report.md` (the new run against the baseline, then `evidence`: the night's A/B
        evidence beside it) and `history.md` (the folder's runs: `history`, the night's
        own, or read from `runs`) with their plots in `night`; name -> path (or `not
        written: why`)."""
        from ..judge.history import build_history, load_dir, window
        from ..records import read_artifact
        from ..records.io import write_output
        from ..report import write_report
        from ..report.renderers import RENDERERS

        links: dict[str, str] = {}
        try:
            base = read_artifact(baseline) if baseline is not None else None
            write_report([read_artifact(new)], night / "report.md", baseline=base,
                         threshold=self.threshold)
            if evidence:
                report = night / "report.md"
                write_output(report, report.read_text() + evidence, "the report")
            links["report"] = str(night / "report.md")
            hist = history or build_history(load_dir(runs).records, where=str(runs))
            shown = window(hist, SHOWN_NIGHTS)
            out = night / "history.md"
            cut = max((len(s.points) for s in hist.series), default=0) > SHOWN_NIGHTS
            head = (f"> The last {SHOWN_NIGHTS} runs of each series; the whole history: "
                    f"`mibench history {runs}`.\n\n" if cut else "")
            plots = RENDERERS.lookup("history-plots")(shown, out)
            write_output(out, head + RENDERERS.lookup("history")(shown, plots), "the history")
            links["history"] = str(out)
        except Exception as e:  # the night's verdict stands without its pictures
            links.setdefault("report", f"not written: {type(e).__name__}: {e}")
            links.setdefault("history", f"not written: {type(e).__name__}: {e}")
        return links

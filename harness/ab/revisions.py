"""Git revisions as checkouts of their engines: a commit resolved in the current
repository, checked out once into a cached detached worktree (`$MIBENCH_CACHE/worktrees/
<sha>`), refused with one line when this harness cannot measure it: it predates the engine
contract, or its engines lack a name the harness's workers import (probed by importing
them, `bootstrap check`). The refusal names the oldest revision on the current branch's
first-parent line that can be measured (found by binary search with the same probe)."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
from pathlib import Path

from mibench.errors import MibenchError, did_you_mean

from ..util import git, git_output

CONTRACT = "engines/contract.py"  # the engine contract a worker's harness talks to


@dataclasses.dataclass(frozen=True)
class Revision:
    """`rev` as given, its commit, subject line and the worktree holding its files."""

    rev: str
    commit: str
    subject: str
    root: Path

    def as_dict(self) -> dict:
        return {"rev": self.rev, "commit": self.commit, "subject": self.subject}


def repository(start: Path | None = None) -> Path:
    """The git checkout holding `start` (the current directory): where revisions live."""
    try:
        return Path(git(Path(start or Path.cwd()), "rev-parse", "--show-toplevel"))
    except MibenchError:
        raise MibenchError("is not inside a git repository; run mibench ab or bisect in "
                           "the checkout whose revisions it compares",
                           field=str(start or Path.cwd())) from None


def resolve(repo: Path, rev: str) -> str:
    """The full commit `rev` names in `repo`; a MibenchError naming `rev` (with the branch
    and tag names closest to it) when it names none."""
    found = commit_of(repo, rev)
    if found is None:
        raise MibenchError(f"is not a commit of {repo}{did_you_mean(rev, refs(repo))}",
                           field=rev)
    return found


def commit_of(repo: Path, rev: str) -> str | None:
    """The full commit `rev` names in `repo`, or None (no such revision, or no git)."""
    if not rev or rev.startswith("-"):  # an option, not a revision
        return None
    return git_output(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}") or None


def refs(repo: Path) -> list[str]:
    """The branch and tag names of `repo` (what a mistyped revision is matched against)."""
    out = git_output(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads",
                     "refs/tags")
    return out.split() if out else []


def distinct(repo: Path, first: str, second: str, command: str) -> tuple[str, str]:
    """The commits of two revisions given to `command` (`ab`, `bisect`), refused in one line
    before anything is built when they are one commit: nothing would be compared."""
    a, b = resolve(repo, first), resolve(repo, second)
    if a == b:
        raise MibenchError(
            f"both are commit {a[:7]}, so nothing would be compared; give an older first "
            f"revision, e.g. `mibench {command} {first}~1 {second} ...`",
            field=f"{first} and {second}" if first != second else first)
    return a, b


def has_contract(repo: Path, commit: str) -> bool:
    files = git(repo, "ls-tree", "-r", "--name-only", commit, "--", CONTRACT, "mibench")
    return CONTRACT in files.split() and "mibench/__init__.py" in files.split()


@functools.cache
def cannot_import(root: Path) -> str | None:
    """Why this harness's workers cannot run the engines in `root` (one line), or None."""
    out = subprocess.run([sys.executable, "-m", "mibench.harness.run.bootstrap", "check",
                          str(root)], capture_output=True, text=True, timeout=300)
    if out.returncode == 0:
        return None
    lines = out.stderr.strip().splitlines()
    return lines[-1] if lines else f"the import check exited with {out.returncode}"


def measurable(repo: Path, commit: str, cache: Path) -> bool:
    return has_contract(repo, commit) and cannot_import(worktree(repo, commit, cache)) is None


def oldest_measurable(repo: Path, cache: Path) -> str | None:
    """The oldest commit on HEAD's first-parent line that this harness can measure, taking
    measurability as monotonic along it (binary search); None when none can be."""
    line = git(repo, "rev-list", "--first-parent", "--reverse", "HEAD").split()
    lo, hi = 0, len(line)
    while lo < hi:
        mid = (lo + hi) // 2
        if measurable(repo, line[mid], cache):
            hi = mid
        else:
            lo = mid + 1
    return line[lo] if lo < len(line) else None


def worktrees(cache: Path, folder: str = "worktrees") -> Path:
    return cache / folder


def worktree(repo: Path, commit: str, cache: Path, folder: str = "worktrees") -> Path:
    """The cached detached worktree of `commit` (made on first use) under `cache/folder`
    (mibench's own revisions: `worktrees`; a server's: `server-worktrees`)."""
    root = worktrees(cache, folder) / commit
    if not (root / ".git").exists():
        root.parent.mkdir(parents=True, exist_ok=True)
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "--detach", "--force", str(root), commit)
    return root


def checkout(repo: Path, rev: str, cache: Path) -> Revision:
    """`rev`'s files in a worktree (made once per commit, then reused); a MibenchError
    naming `rev` when this harness cannot measure it."""
    commit = resolve(repo, rev)
    why = (None if has_contract(repo, commit) else
           f"predates the engine contract ({CONTRACT} and the mibench namespace)")
    root = worktree(repo, commit, cache) if why is None else None
    if why is None and (broken := cannot_import(root)):
        why = f"has engines this harness's workers cannot import ({broken})"
    if why:
        oldest = oldest_measurable(repo, cache)
        hint = (f"the oldest revision that can be measured is {oldest[:12]}" if oldest else
                "no commit on this branch can be")
        raise MibenchError(f"commit {commit[:12]} {why}: {hint}", field=rev)
    return Revision(rev=rev, commit=commit, subject=git(repo, "log", "-1", "--format=%s",
                                                        commit), root=root)


def first_parent(repo: Path, good: str, bad: str) -> list[str]:
    """Commits after `good` up to `bad` along bad's first parents, oldest first."""
    return git(repo, "rev-list", "--first-parent", "--reverse",
               f"{resolve(repo, good)}..{resolve(repo, bad)}").split()

"""Git revisions as checkouts of their engines: a commit resolved in the current
repository, checked out once into a cached detached worktree (`$MIBENCH_CACHE/worktrees/
<sha>`), refused with one line when it predates the engine contract."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from mibench.errors import MibenchError

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


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise MibenchError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else
                           f"git {' '.join(args)} failed", field="git")
    return out.stdout.strip()


def repository(start: Path | None = None) -> Path:
    """The git checkout holding `start` (the current directory): where revisions live."""
    try:
        return Path(git(Path(start or Path.cwd()), "rev-parse", "--show-toplevel"))
    except MibenchError:
        raise MibenchError("is not inside a git repository; run mibench ab or bisect in "
                           "the checkout whose revisions it compares",
                           field=str(start or Path.cwd())) from None


def resolve(repo: Path, rev: str) -> str:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except MibenchError:
        raise MibenchError(f"is not a commit of {repo}", field=rev) from None


def oldest_measurable(repo: Path) -> str | None:
    """The first commit that has the engine contract (what a revision needs to be measured)."""
    added = git(repo, "log", "--format=%H", "--diff-filter=A", "--reverse", "--", CONTRACT)
    return added.split()[0] if added else None


def worktrees(cache: Path) -> Path:
    return cache / "worktrees"


def checkout(repo: Path, rev: str, cache: Path) -> Revision:
    """`rev`'s files in a worktree (made once per commit, then reused)."""
    commit = resolve(repo, rev)
    files = git(repo, "ls-tree", "-r", "--name-only", commit, "--", CONTRACT, "mibench")
    if CONTRACT not in files.split() or "mibench/__init__.py" not in files.split():
        oldest = oldest_measurable(repo)
        hint = (f"the oldest revision that can be measured is {oldest[:12]}" if oldest else
                "no commit of this repository has it")
        raise MibenchError(f"commit {commit[:12]} predates the engine contract ({CONTRACT} "
                           f"and the mibench namespace): {hint}", field=rev)
    root = worktrees(cache) / commit
    if not (root / CONTRACT).is_file():
        root.parent.mkdir(parents=True, exist_ok=True)
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "--detach", "--force", str(root), commit)
    return Revision(rev=rev, commit=commit, subject=git(repo, "log", "-1", "--format=%s",
                                                        commit), root=root)


def first_parent(repo: Path, good: str, bad: str) -> list[str]:
    """Commits after `good` up to `bad` along bad's first parents, oldest first."""
    return git(repo, "rev-list", "--first-parent", "--reverse",
               f"{resolve(repo, good)}..{resolve(repo, bad)}").split()

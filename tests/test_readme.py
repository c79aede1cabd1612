"""The README's example commands cannot drift: the cheap ones run, the rest must name
commands and options that exist."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
COMMANDS = [line.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", README,
                                                                re.S)
            for line in block.splitlines() if line.startswith("mibench ")]
RUNNABLE = ("validate", "score", "model", "env")


def _mibench(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *args], capture_output=True,
                          text=True, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1",
                                                        "PATH": "/usr/bin:/bin",
                                                        "PYTHONPATH": str(ROOT),
                                                        "MIBENCH_CACHE": _cache()})


def _cache() -> str:
    from mibench.engines.embedded import cache_dir

    return str(cache_dir())


def test_readme_starts_with_the_two_commands():
    first = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].endswith("mibench run configs/cpu-smoke.yaml")
    assert first[1].endswith("python -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text()
    assert "python -m pytest -q" in ci and "ruff check ." in ci and "torch==2.13.0" in ci


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command(command, tmp_path):
    args = shlex.split(command)[1:]
    if args[0] in RUNNABLE:
        (tmp_path / "configs").symlink_to(ROOT / "configs")
        out = _mibench(args, tmp_path)
        assert out.returncode == 0, out.stderr
        return
    help_text = _mibench([args[0], "--help"], tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    for option in (a.split("=")[0] for a in args[1:] if a.startswith("--")):
        assert option in help_text.stdout, f"{option} is not an option of {args[0]}"
    for path in (a for a in args[1:] if a.startswith("configs/")):
        assert (ROOT / path).is_file()


def test_readme_mode_table_is_the_registry():
    """The README's mode table names exactly the JAX modes and options of the registry."""
    from mibench.engines import MODES

    table = README.split("| mode | options | what it does |", 1)[1].split("\n\n", 1)[0]
    rows = [re.split(r"(?<!\\)\|", line)[1:3] for line in table.splitlines()[2:]
            if line.startswith("|")]  # cells split at unescaped pipes
    readme = {re.findall(r"`(\w+)`", mode)[0]:
              {name for name in re.findall(r"`(\w+)(?::[^`]*)?`", opts)} for mode, opts in rows}
    assert readme == {name: set(mode.options) for name, mode in MODES["jax"].items()}

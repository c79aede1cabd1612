"""The config's problems with the keys of http cases (the servers under test): what
`mibench validate` finds, through the case kind's hooks (harness/case_kinds.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..config.cases import CaseSpec
from ..config.yamlsource import Problem


def host_problems(case: CaseSpec) -> list[Problem]:
    """A launched server's folder and interpreter exist here (a `$VARIABLE` interpreter that
    is not set skips the case at run time instead)."""
    launch = case.http.launch
    if launch is None:
        return []
    if launch.cwd is not None and not Path(launch.cwd).is_dir():
        return [Problem(("cases", case.index, "launch", "cwd"),
                        f"{launch.cwd} is not a folder here (the server starts in it)")]
    python = launch.interpreter()
    if launch.python is not None and python is not None and shutil.which(python) is None:
        return [Problem(("cases", case.index, "launch", "python"),
                        f"{python} is not an executable file here")]
    return []

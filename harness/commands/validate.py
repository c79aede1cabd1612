"""`mibench validate CONFIG...`: expand and check each config, print its cases, run
nothing. Every config is checked; each bad one is one `error:` line naming its file and
key, and the exit code is 2 when any was bad."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from mibench.errors import MibenchError

from .common import Sets, guarded, one_line


@guarded
def validate(configs: Annotated[list[Path], typer.Argument(help="Configs to check.")],
             set_: Sets = None):
    """Expand and check each CONFIG; print its cases; run nothing."""
    bad = 0
    for path in configs:
        try:
            text = validate_config(path, set_ or [])
        except MibenchError as e:
            print(f"error: {one_line(str(e))}", file=sys.stderr)
            bad += 1
            continue
        if len(configs) > 1:
            print(f"== {path}")
        print(text)
    if bad:
        raise typer.Exit(2)


def validate_config(config_path: Path, sets: list[str]) -> str:
    """The case list of a valid config with each case's time on this machine at the least
    (harness/run/estimate.py), and the warning when it is made for another machine (a
    MibenchError names what is wrong)."""
    from ..config import load_config
    from ..config.idle import notes
    from ..config.matrix import expand
    from ..report.console import render_cases
    from ..run.estimate import cell, of_config

    config = load_config(config_path, sets)
    cases = expand(config)
    found, summary, warning = of_config(config, cases, str(config_path))
    return "\n".join([*([warning] if warning else []),
                      render_cases(config, cases, [cell(e) for e in found]), summary,
                      *notes(config, cases)])

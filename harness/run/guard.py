"""The CLI's one rule for expected failures: MibenchError -> one line on stderr, exit 2."""

from __future__ import annotations

import functools
import sys

import typer

from mibench.errors import MibenchError


def guarded(fn):
    """Wrap a Typer command: `error: ...` on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MibenchError as e:
            print(f"error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None

    return wrapper

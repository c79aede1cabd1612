"""The CLI's one rule for expected failures: one `error: ...` line on stderr and exit 2,
never a traceback. `guarded` wraps each command (MibenchError, and OSError: a file or
folder the command cannot read or write); `OneLineErrors`, the app's group class, does
the same for Click's usage errors (an unknown option, a value of the wrong type), which
Typer would print as a box of several lines."""

from __future__ import annotations

import functools
import sys

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer on the click package
    from click import exceptions as click_errors

from mibench.errors import MibenchError


def one_line(text: str) -> str:
    """`text` on one line: its lines joined with spaces, blank ones dropped."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def fail(message: str, code: int = 2):
    print(f"error: {one_line(message)}", file=sys.stderr)
    raise typer.Exit(code)


def os_message(e: OSError) -> str:
    """`FILE: why` of an OSError (both files of a rename)."""
    why = e.strerror or type(e).__name__
    names = [str(n) for n in (e.filename, e.filename2) if n is not None]
    return f"{' -> '.join(names)}: {why}" if names else why


def guarded(fn):
    """Wrap a Typer command: `error: ...` on stderr and exit 2, never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MibenchError as e:
            fail(str(e))
        except BrokenPipeError:
            raise  # stdout closed by a pager or `head`: Typer exits quietly
        except OSError as e:  # a file or folder that cannot be read or written
            fail(os_message(e))

    return wrapper


class OneLineErrors(TyperGroup):
    """The top-level command group: usage errors (no such option, a bad value, a missing
    argument) are one `error: ...` line naming the option and exit 2, like every other
    expected failure."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click_errors.NoArgsIsHelpError as e:  # the help was printed
            sys.exit(e.exit_code)
        except click_errors.ClickException as e:
            ctx = getattr(e, "ctx", None)
            hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
            print(f"error: {one_line(e.format_message())}{hint}", file=sys.stderr)
            sys.exit(e.exit_code)
        except typer.Abort:
            print("error: aborted", file=sys.stderr)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) and not isinstance(rv, bool) else 0)

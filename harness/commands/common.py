"""What several commands share, in one place.

- The CLI's one rule for expected failures: one `error: ...` line on stderr and exit 2
  (the error's `exit_code`: 4 for an EnvironmentFailed, a disk that filled mid-run),
  never a traceback. `guarded` wraps each command (MibenchError, and OSError: a file or
  folder the command cannot read or write); `OneLineErrors`, the app's group class, does
  the same for Click's usage errors (an unknown option, a value of the wrong type), which
  Typer would print as a box of several lines.
- Option types every command spells the same way (`Sets`, `CaseGlobs`, `Threshold` and
  `threshold_option(kinds)`, `Format`; the closed sets `EngineName`, `ModeName`,
  `DtypeName`, `SemanticsName`, whose allowed values `--help` shows), and their parsers:
  `parse_threshold`, `parse_thresholds` (`--threshold 5%`, `--threshold memory=10%`),
  `parse_format`, `parse_options`.
- Help without placeholder noise (`plain_help`): `CONFIG`, `PATH`, `N`, `TEXT`, allowed
  values as `[a|b]`, nothing after a flag.
- Files: `writable_folder` (an artifact folder), `out_file` (the file a one-file
  command's --out names), and the artifact readers `load` / `load_checked` / `schema_of`.
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
from pathlib import Path
from typing import Annotated, get_args

import typer
from typer.core import TyperGroup

try:  # typer >= 0.20 carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer on the click package
    from click import exceptions as click_errors

from mibench.engines import DTYPES, ENGINES, MODES  # the registries (no jax)
from mibench.errors import MibenchError
from mibench.files import read_bounded


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
    """Wrap a Typer command: `error: ...` on stderr and exit 2 (or the MibenchError's own
    `exit_code`), never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except MibenchError as e:
            fail(str(e), e.exit_code)
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
        plain_help(self)
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


def _metavar(param) -> str:
    """What `--help` shows after an option: its allowed values, or a word for its kind."""
    if getattr(param, "is_flag", False) or getattr(param, "count", False):
        return ""
    desc = param.type_descriptor
    if desc.is_choice:
        return "[" + "|".join(str(c) for c in desc.choices) + "]"
    kind = get_args(desc.annotation)[0] if desc.is_list else desc.annotation
    if desc.is_path or kind is Path:
        return "PATH"
    return {int: "N", float: "NUMBER"}.get(kind, "TEXT")


def plain_help(command) -> None:
    """Metavars without placeholder noise in every command under `command` (Typer shows
    `<bool>`, `<list[str]>`, `<path>` and `{config}` otherwise): arguments by their name
    in capitals (`CONFIG`, `[OUT]`, `ARTIFACTS...`), options by `_metavar`."""
    for sub in getattr(command, "commands", {}).values():
        plain_help(sub)
    made = command.get_help_option  # `--help` itself is made on demand: a flag, no metavar

    def help_option(ctx, made=made):
        option = made(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = help_option
    for param in getattr(command, "params", []):
        if param.metavar is not None:
            continue
        if param.param_type_name == "argument":
            param.metavar = param.name.upper()
            usage = param.metavar + ("..." if param.nargs != 1 else "")
            usage = usage if param.required else f"[{usage}]"
            param.get_usage_pieces = lambda ctx, usage=usage: [usage]
            param.display_type_rich = lambda ctx: None
        else:
            param.metavar = _metavar(param)


# ---- option types ------------------------------------------------------------------------

Sets = Annotated[list[str] | None, typer.Option(
    "--set", metavar="KEY=VALUE",
    help="Override a config key: a.b=value (value parsed as YAML); repeatable.")]
CaseGlobs = Annotated[list[str] | None, typer.Option(
    "--case", metavar="GLOB", help="Only the cases whose id matches this glob (fnmatch, e.g. "
                   "'jax/packed/*'); repeatable: the union.")]
# --threshold: the time threshold as a bare P, another kind as KIND=P (repeatable); each
# kind's default and what it measures
THRESHOLDS = {"time": "5%", "memory": "10%", "cost": "5%"}
THRESHOLD_OF = {"time": "time per item", "memory": "a case's own peak memory",
                "cost": "a compiled case's peak HBM, bytes accessed or FLOPs"}


def threshold_option(*kinds: str):
    """The `--threshold` option of a command whose thresholds are `kinds`."""
    parts = [f"{'P or ' if k == 'time' else ''}{k}=P: {THRESHOLD_OF[k]} (default "
             f"{THRESHOLDS[k]})" for k in kinds]
    return Annotated[list[str] | None, typer.Option(
        "--threshold", metavar="P" if kinds == ("time",) else "KIND=P",
        help="Smallest relative change that counts (P: 5% or 0.05); " + "; ".join(parts)
             + "; repeatable.")]


Threshold = threshold_option("time")


def choices(values) -> str:
    """`[a|b|c]`: the allowed values of an option, as `--help` shows them."""
    return "[" + "|".join(values) + "]"


Format = Annotated[str, typer.Option("--format", metavar=choices(("md", "json")),
                                     help="Markdown or JSON.")]
# closed sets, from the registries: `--help` lists them; the engines check a value (their
# one-line errors name the option and what is known)
EngineName = Annotated[str, typer.Option(metavar=choices(ENGINES), help="The engine.")]
ModeName = Annotated[str, typer.Option(
    metavar=choices(dict.fromkeys(m for modes in MODES.values() for m in modes)),
    help="The engine's mode (the jax engine has every one).")]
DtypeName = Annotated[str, typer.Option(metavar=choices(DTYPES), help="Parameter dtype.")]


def parse_threshold(text: str, field: str = "--threshold") -> float:
    """`5%` -> 0.05; `0.05` -> 0.05; a bare number of 1 or more is taken as percent. A bad
    value is a MibenchError naming `field` (the option it came from)."""
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise MibenchError("not a number (use e.g. 5% or 0.05)", field=field) from None
    if text.strip().endswith("%") or value >= 1:
        value /= 100
    if not 0 <= value < 1:
        raise MibenchError("must be between 0% and 100%", field=field)
    return value


def parse_thresholds(given: list[str] | None, kinds: tuple[str, ...],
                     **deprecated: str | None) -> dict[str, float]:
    """{kind: fraction} for each of `kinds` from `--threshold` values (`5%`: time;
    `memory=10%`, `cost=5%`: that kind; each kind once), a kind not given at its default.
    `deprecated`: the value of an old `--KIND-threshold` option (None: not given), still
    taken, with one line on stderr naming the new form. A bad value or a kind the command
    lacks is a MibenchError naming --threshold."""
    out: dict[str, float] = {}
    for text in given or []:
        kind, eq, value = text.rpartition("=")
        kind = kind.strip() or "time"
        if kind not in kinds:
            from mibench.errors import did_you_mean

            raise MibenchError(f"{text!r}: no {kind} threshold here{did_you_mean(kind, kinds)}"
                               f" (give {', '.join(f'{k}=P' for k in kinds)})",
                               field="--threshold")
        if kind in out:
            raise MibenchError(f"{kind} given twice", field="--threshold")
        out[kind] = parse_threshold(value, f"--threshold {kind}" if eq else "--threshold")
    for kind, value in deprecated.items():
        if value is None:
            continue
        flag = f"--{kind}-threshold"
        if kind in out:
            raise MibenchError(f"give it once, as --threshold {kind}=P", field=flag)
        out[kind] = parse_threshold(value, flag)
        print(f"warning: {flag} is deprecated: use --threshold {kind}={value}", file=sys.stderr)
    return {k: out[k] if k in out else parse_threshold(THRESHOLDS[k]) for k in kinds}


def deprecated_threshold(kind: str):
    """The hidden old `--KIND-threshold` option (parse_thresholds takes its value)."""
    return Annotated[str | None, typer.Option(f"--{kind}-threshold", hidden=True)]


def parse_format(text: str) -> str:
    if text not in ("md", "json"):
        raise MibenchError(f"unknown format {text!r} (md or json)", field="--format")
    return text


def parse_options(options: list[str]) -> dict:
    """`--option key=value` pairs (value parsed as YAML) as a dict."""
    from ..config.yamlsource import load_yaml

    out = {}
    for opt in options:
        key, eq, value = opt.partition("=")
        if not eq or not key.strip():
            raise MibenchError(f"expected key=value, got {opt!r}", field="--option")
        out[key.strip()] = load_yaml(value, f"--option {key.strip()}")[0]
    return out


# ---- files -------------------------------------------------------------------------------


# `--out` names a folder in every command; a command whose output is one file (report,
# history, export, job overhead, job serve-flood) also takes the file itself: a path ending
# in one of these suffixes (docs/cli.md "Where --out writes")
FILE_SUFFIXES = (".md", ".csv", ".json", ".html", ".txt", ".tsv")


def names_a_file(path: Path) -> bool:
    """Whether `--out PATH` names a file rather than a folder: it ends in a file suffix and
    is no folder that exists."""
    return Path(path).suffix.lower() in FILE_SUFFIXES and not Path(path).is_dir()


def _file_for_folder(folder: Path) -> str:
    return (f"{folder} names a file, but this command writes a folder (its files named for "
            f"you); give a folder, e.g. {folder.with_suffix('')}")


def folder_out(value: Path | None) -> Path | None:
    """The callback of a folder command's `--out` (`typer.Option(callback=folder_out)`): a
    path that names a file is refused while the arguments are parsed, before anything
    runs."""
    if value is not None and names_a_file(value):
        raise typer.BadParameter(_file_for_folder(Path(value)))
    return value


def writable_folder(folder: Path, flag: str) -> Path:
    """`folder`, made if needed, after proving a file can be written in it; else a
    MibenchError naming `flag` (a file, a folder under a file, no permission, or an `--out`
    that names a file: this command writes a folder)."""
    folder = Path(folder)
    if flag == "--out" and names_a_file(folder):
        raise MibenchError(_file_for_folder(folder), field=flag)
    try:
        if folder.exists() and not folder.is_dir():
            raise MibenchError(f"{folder} is a file, not a folder", field=flag)
        parent = folder
        while not parent.exists() and parent.parent != parent:
            parent = parent.parent
        if parent.exists() and not parent.is_dir():
            raise MibenchError(f"{parent} is a file, so {folder} cannot be a folder under it",
                               field=flag)
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise MibenchError(f"cannot write in {folder}: {e.strerror or e}", field=flag) from None
    return folder


def out_file(out: Path | None, default: str) -> Path | None:
    """The file that `--out` names for a command whose output is one file: a path ending in
    a file suffix (`reports/cpu.md`) is the file itself, any other path a folder (made when
    written) that gets `default` (`reports/` -> `reports/report.md`); None: stdout. A path
    under a file is a MibenchError naming --out."""
    if out is None:
        return None
    out = Path(out) if names_a_file(out) or Path(out).is_file() else Path(out) / default
    parent = out.parent
    while not parent.exists() and parent.parent != parent:
        parent = parent.parent
    if not parent.is_dir():
        raise MibenchError(f"{parent} is a file, so {out} cannot be written under it",
                           field="--out")
    return out


def write_text(out: Path | None, text: str) -> None:
    """`text` to FILE (its folder made), saying so, or to stdout."""
    if out is None:
        print(text, end="")
        return
    from ..records.io import write_output

    write_output(out, text)
    print(f"wrote {out}")


def schema_of(path: Path) -> str | None:
    """The schema field of the JSON file at `path`, or None (`load` names what is wrong)."""
    from ..records.io import MAX_ARTIFACT_BYTES

    try:
        return json.loads(read_bounded(path, MAX_ARTIFACT_BYTES)).get("schema")
    except (OSError, ValueError, AttributeError, RecursionError):  # a MibenchError too
        return None


def load(path: Path):
    """A run artifact as every reader takes it (report, history, compare --noise-from):
    readable, and `defect` finds nothing no run writes (a duplicate case, tripled or empty
    timed_s, summaries that disagree with the samples); the error names file and case."""
    from ..judge.comparable import defect
    from ..records import read_artifact

    record = read_artifact(path)
    why = defect(record)
    if why:
        raise MibenchError(f"invalid artifact: {why}", field=str(path))
    return record


def select_records(records: list, globs: list[str] | None) -> list:
    """Copies of the artifacts (run or compile) holding only the cases whose id matches one
    of the `--case` globs (all of them without globs); a glob that matches no case of any
    artifact is a MibenchError naming --case."""
    import fnmatch

    from ..config.matrix import select_cases

    if not globs:
        return list(records)
    select_cases([c for r in records for c in r.cases], globs, "these artifacts")
    return [r.model_copy(update={"cases": [c for c in r.cases if any(
        fnmatch.fnmatchcase(c.case_id, g) for g in globs)]}) for r in records]


def load_checked(path: Path):
    """An artifact fit for a comparison: `load`, and `invalid` finds nothing either (it
    has cases)."""
    from ..judge.comparable import invalid

    record = load(path)
    why = invalid(record)
    if why:
        raise MibenchError(f"cannot be compared: {why}", field=str(path))
    return record

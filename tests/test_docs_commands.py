"""Every command line of README.md and docs/*.md works as written, so a line that fails
fails CI. Each line of a fenced bash block that calls `mibench`, and each inline
`mibench ...` span that names a real path (an example, not a synopsis), is checked in
process, in a temporary folder where `configs/` is the repository's and every input file it
names (`artifacts/cpu/<new>.json`, `OLD.json`, `artifacts/cpu/*.json`) is a real artifact
from tests/data:

- parsed by the command's own Click parser (an unknown option, a missing argument or a
  value of the wrong type fails);
- `validate`, `compare` (of two artifact files), `report`, `history` and `export` run for
  real (exit 0 or 1);
- a command that takes a config has the config loaded with its `--set`s and its `--case`
  globs matched (`compile` resolves its TPU target too: its dry run), as `run` would.

Everything else (a run, an A/B, a server) costs more than a test may: parse only."""

from __future__ import annotations

import glob
import json
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
START = re.compile(r"(?:^|(?<=\s))mibench (?=[a-z-])")  # not `python -m mibench.x`
REAL_RUN = ("validate", "compare", "report", "history", "export")
# synopsis words of the docs, as the files a test can give them
PLACEHOLDERS = {"CONFIG": "configs/cpu-smoke.yaml", "DIR": "out/dir", "HISTORY": "out/dir",
                "FOLDER": "artifacts/cpu", "BASE": "artifacts/cpu/old.json",
                "NEW": "artifacts/cpu/new.json", "ARTIFACT": "artifacts/cpu/new.json"}
TEMPLATES = {"old": DATA / "reports" / "base.json", "base": DATA / "reports" / "base.json",
             "compile": DATA / "compile-tiny-v6e-1.json"}


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def command_at(line: str) -> str | None:
    """The `mibench ...` command of a shell line, up to a pipe, `&&`, a redirection or a
    comment; None when the line calls none."""
    m = START.search(line)
    if m is None:
        return None
    text = re.split(r"\s(?:&&|\|\|?|>>?|2>|#)(?:\s|$)", line[m.start():] + " ")[0]
    return text.strip()


def is_example(span: str) -> bool:
    """An inline span meant to be run: no synopsis marks (`[...]`, `a|b`, `...`) and at
    least one real path (`configs/cpu.yaml`, `OLD.json`)."""
    if re.search(r"\[|\||\.\.\.", span):
        return False
    return any("/" in t or re.search(r"\.(json|yaml|md|csv)$", t) for t in span.split()[1:])


def command_lines(text: str) -> list[str]:
    """Every command line of a Markdown page: the fenced bash blocks' (continuations
    joined) and the inline examples."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang not in ("bash", "sh", "shell", "console"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            command = command_at(line)
            if command and not line.lstrip().startswith("#"):
                found.append(command)
    for span in re.findall(r"`([^`\n]+)`", FENCE.sub("", text)):
        if span.startswith("mibench ") and is_example(span):
            found.append(span)
    return found


CASES = [(path, line) for path in DOCS for line in command_lines(path.read_text())]
LINES: dict[str, list[str]] = {}  # each distinct line once, with the pages that have it
for _path, _line in CASES:
    LINES.setdefault(_line, []).append(_rel(_path))


def _cli():
    import typer

    from mibench.harness.cli import app

    return typer.main.get_command(app)


def parse(args: list[str]):
    """(the command's name, its Click context) for `args` after `mibench`: parsed by the
    app's own parser, nothing run; a usage error raises click's UsageError."""
    command, name = _cli(), []
    while hasattr(command, "commands"):
        sub = command.commands.get(args[0]) if args else None
        if sub is None:
            raise AssertionError(f"no command {' '.join([*name, *args[:1]])!r}")
        name.append(args.pop(0))
        command = sub
    return " ".join(name), command.make_context(" ".join(["mibench", *name]), args)


def materialise(args: list[str], folder: Path) -> list[str]:
    """`args` with placeholders as real files under `folder` (the working folder): `<x>`
    dropped to `x`, synopsis words as files, every input `.json` a copy of a test artifact
    (`old`/`base`: the baseline, `compile`: a compile artifact, else the new run), a
    `*.json` glob expanded over a folder of two artifacts."""
    out = []
    for arg in args:
        arg = PLACEHOLDERS.get(arg, re.sub(r"<([^>]+)>", r"\1", arg))
        if arg.endswith(".json") and not arg.startswith("/"):
            target = folder / arg
            if not target.exists():
                kind = next((k for k in TEMPLATES if k in Path(arg).stem.lower()), None)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(TEMPLATES.get(kind, DATA / "reports" / "new.json"), target)
        if "*" in arg and arg.endswith(".json"):
            for name in ("old", "new"):
                materialise([str(Path(arg).parent / f"{name}.json")], folder)
        matches = sorted(glob.glob(arg, root_dir=folder)) if "*" in arg else []
        out += matches or [arg]  # as the shell expands it (a glob matching nothing: as is)
    return out


def input_folders(folder: Path, args: list[str]) -> None:
    """`history FOLDER`: a folder of the two artifacts; `--noise-from FOLDER`: two runs of
    one commit (an A/A pair)."""
    for arg in args[1:2] if args[0] == "history" else []:
        if not (folder / arg).exists() and "." not in Path(arg).name:
            materialise([f"{arg}/old.json", f"{arg}/new.json"], folder)
    for flag, arg in zip(args, args[1:], strict=False):
        if flag == "--noise-from" and not (folder / arg).exists():
            (folder / arg).mkdir(parents=True)
            data = json.loads(TEMPLATES["base"].read_text())
            for run in ("aa-1", "aa-2"):
                (folder / arg / f"{run}.json").write_text(json.dumps({**data, "run_id": run}))


def check_configs(name: str, params: dict) -> None:
    """A command that takes a config: the config loads with the line's `--set`s and its
    `--case` globs match, as the command would check them before it runs anything."""
    from mibench.harness.commands.compile import plan_compile
    from mibench.harness.commands.validate import validate_config
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand, select_cases

    paths = params.get("configs") or ([params["config"]] if params.get("config") else [])
    sets, globs = params.get("set_") or [], params.get("case") or []
    if name == "compile":
        plan_compile(paths, sets, params.get("target"), globs)
        return
    for path in paths:
        validate_config(Path(path), sets)
        select_cases(expand(load_config(Path(path), sets)), globs)


def check(line: str, folder: Path) -> str | None:
    """What is wrong with the command line `line` run in `folder`; None when it works."""
    args = materialise(shlex.split(line)[1:], folder)
    input_folders(folder, args)
    try:
        name, ctx = parse(list(args))
    except Exception as e:  # click's UsageError, BadParameter, ...
        why = e.format_message() if hasattr(e, "format_message") else str(e)
        return f"does not parse: {why}"
    sides = [str(ctx.params[s]) for s in ("base", "new") if ctx.params.get(s) is not None]
    if name in REAL_RUN and (name != "compare" or sides and all(
            side.endswith(".json") for side in sides)):
        from mibench.harness.cli import app  # (compare of two revisions would measure)

        result = CliRunner().invoke(app, args)
        if result.exit_code not in (0, 1) or result.exception and not isinstance(
                result.exception, SystemExit):
            return f"exit {result.exit_code}: {result.output.strip()[-400:]}"
        return None
    from mibench.errors import MibenchError

    try:
        check_configs(name, ctx.params)
    except MibenchError as e:
        return f"error: {e}"
    return None


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "configs").symlink_to(ROOT / "configs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


@pytest.mark.parametrize("line", LINES, ids=[f"{pages[0]}:{line[:70]}"
                                              for line, pages in LINES.items()])
def test_documented_line_works(line, workdir):
    problem = check(line, workdir)
    assert problem is None, f"{', '.join(LINES[line])}: `{line}`: {problem}"


def test_every_page_is_read():
    """The extraction finds the lines it must (a broken pattern would check nothing)."""
    lines = {line for _, line in CASES}
    assert "mibench compile configs/v6e1.yaml --out artifacts/compile" in lines
    assert "mibench compare OLD.json NEW.json" in lines  # an inline example
    assert "mibench job gpu --out /tmp/gpu --dry-run" in lines  # comment cut off
    assert not any(line.startswith("mibench compare BASE NEW") for line in lines)  # synopsis
    assert len(CASES) > 100


@pytest.mark.parametrize("line,why", [
    ("mibench compare OLD.json", "exit 2"),  # BASE without NEW
    ("mibench ab main HEAD", "does not parse"),  # a missing argument
    ("mibench run configs/cpu.yaml --outt x", "does not parse"),  # an unknown option
    ("mibench ab main HEAD configs/cpu.yaml --rounds many", "does not parse"),  # a bad value
    ("mibench validate configs/no-such.yaml", "exit 2"),  # run for real
    ("mibench run configs/cpu.yaml --set workload.num_itemz=3", "error:"),  # its config
    ("mibench run configs/cpu.yaml --case 'nothing/*'", "error:"),
    ("mibench compile configs/cpu.yaml --out x", "error:"),  # no topology.target: no target
    ("mibench compare old.json new.json --threshold lots", "exit 2"),
])
def test_control_a_wrong_line_fails(line, why, workdir):
    problem = check(line, workdir)
    assert problem is not None and problem.startswith(why), problem

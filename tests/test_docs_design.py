"""docs/design.md is the map of the house: its recipes are checked against the code, so a
moved file, a registry entry gone or a new file that names every mode (and so belongs in
the mode recipe) fails here, naming what to fix. Each recipe: every path it names exists,
its registry holds the entries it says, its file count is its list's length, and its
files are exactly those that name that kind of extension today (grep: the Python files
whose string literals hold every name of the kind, the docs that name them all in
backticks, and the registry's own file), `(new)` and `(when ...)` files aside. The
controls break one thing each and see the check fail."""

from __future__ import annotations

import ast
import importlib
import io
import re
import subprocess
import tokenize
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()
PATH = re.compile(r"\b(?:engines|harness|mibench|workloads|docs|tests|configs)/[\w/.<>-]*"
                  r"|\b[\w-]+\.md\b")


@cache
def tracked() -> tuple[str, ...]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    return tuple(out.stdout.split())


@cache
def literals(path: str) -> frozenset:
    """The string constants of a Python file (comments and docstrings' words are not)."""
    found = set()
    for tok in tokenize.generate_tokens(io.StringIO((ROOT / path).read_text()).readline):
        if tok.type == tokenize.STRING:
            try:
                found.add(ast.literal_eval(tok.string))
            except (ValueError, SyntaxError):  # an f-string
                pass
    return frozenset(s for s in found if isinstance(s, str))


def naming(names) -> set[str]:
    """The files that name every one of `names`: Python outside the tests (as a string
    literal) and the docs (README.md, docs/ but this map, configs/README.md: in
    backticks)."""
    files = tracked()
    code = {f for f in files if f.endswith(".py") and not f.startswith("tests/")
            and all(n in literals(f) for n in names)}
    docs = {f for f in files if f in ("README.md", "configs/README.md")
            or (f.startswith("docs/") and f.endswith(".md") and f != "docs/design.md")}
    return code | {f for f in docs if all(f"`{n}`" in (ROOT / f).read_text() for n in names)}


def recipes(text: str) -> dict[str, dict]:
    """Each `### Recipe: kind` section: its count, registry and files (path -> tag)."""
    out = {}
    for head, body in re.findall(r"^### Recipe: ([^\n]+)\n(.*?)(?=^### |\Z)", text, re.M | re.S):
        count = re.search(r"^Files touched: (\d+)\.", body, re.M)
        reg = re.search(r"^Registry: `(\w+)` in `([^`]+)`, holding (.+)\.$", body, re.M)
        files = dict(re.findall(r"^- `([^`]+)`( \((?:new|when)\b)?", body, re.M))
        out[head] = {"count": int(count.group(1)) if count else None,
                     "registry": (reg.group(1), reg.group(2), re.findall(r"`(\w+)`",
                                                                        reg.group(3)))
                     if reg else None, "files": files}
    return out


def module_of(path: str):
    parts = Path(path).with_suffix("").parts
    parts = parts[:-1] if parts[-1] == "__init__" else parts
    return importlib.import_module(".".join(parts if parts[0] == "mibench"
                                            else ("mibench", *parts)))


def registry(path: str, name: str):
    """A recipe's registry: a Mapping, or the Typer app's command names."""
    value = getattr(module_of(path), name)
    if isinstance(value, Mapping):
        return value
    return {c.name or c.callback.__name__: c for c in value.registered_commands}


def _jax_modes():
    from mibench.engines import MODES
    return [m for m in MODES["jax"] if m != "single"]  # `single`: a word too common


def _in_process_engines():
    from mibench.engines import ENGINES
    return [e for e in ENGINES if e != "http"]  # http: a server's, see the wire recipe


def _exporters():
    from mibench.harness.report.exporters import EXPORTERS
    return list(EXPORTERS)


def _renderers():
    from mibench.harness.report.renderers import EXPORT, RENDERERS
    return [r for r in RENDERERS if not r.startswith(EXPORT)]  # exporters: their own recipe


def _parity_checks():
    from mibench.harness.run.parity import PARITY_CHECKS
    return list(PARITY_CHECKS)


def _table_row(key: str) -> set[str]:
    """The docs with a table row of the key (`| \\`wire\\` |`)."""
    return {f for f in tracked() if f.startswith("docs/") and f.endswith(".md")
            and f"| `{key}` |" in (ROOT / f).read_text()}


# recipe -> the files that name that kind of extension today, its registry file aside
ACTUAL = {
    "mode": lambda: naming(_jax_modes()),
    "engine": lambda: naming(_in_process_engines()),
    "exporter": lambda: naming(_exporters()),
    "renderer": lambda: naming(_renderers()),
    "parity check": lambda: naming(_parity_checks()),
    "wire": lambda: _table_row("wire"),
    "command": lambda: {"docs/cli.md"},
    "case kind": lambda: set(),
}


def path_problems(text: str) -> list[str]:
    """Every path the page names exists (`<name>`: its folder does)."""
    problems = []
    for found in sorted(set(PATH.findall(text))):
        path = found.rstrip(".")
        real = Path(path).parent if "<" in path else Path(path)
        if not (ROOT / real).exists():
            problems.append(f"docs/design.md names {path}, which does not exist")
    return problems


def recipe_problems(text: str, name: str) -> list[str]:
    r = recipes(text).get(name)
    if r is None:
        return [f"no recipe for {name}"]
    problems = []
    if r["count"] != len(r["files"]):
        problems.append(f"{name}: 'Files touched: {r['count']}' but {len(r['files'])} listed")
    if r["registry"] is None:
        return problems + [f"{name}: no 'Registry: `NAME` in `path`, holding ...' line"]
    attr, path, entries = r["registry"]
    missing = [e for e in entries if e not in registry(path, attr)]
    if missing:
        problems.append(f"{name}: {attr} in {path} does not hold {missing}")
    actual = ACTUAL[name]() | {path}
    tagged = {f for f, tag in r["files"].items() if tag}
    unnamed = sorted(actual - set(r["files"]))
    if unnamed:
        problems.append(f"{name}: the recipe does not name {unnamed}, which name every "
                        f"{name} today")
    extra = sorted(set(r["files"]) - actual - tagged)
    if extra:
        problems.append(f"{name}: the recipe names {extra}, which do not (tag a file a "
                        "recipe adds `(new)`, one it touches only sometimes `(when ...)`)")
    return problems


@pytest.mark.parametrize("name", ACTUAL)
def test_each_recipe_is_true(name):
    assert recipe_problems(DESIGN, name) == []


def test_every_path_the_map_names_exists():
    assert path_problems(DESIGN) == []


def test_every_exporter_module_is_registered():
    from mibench.harness.report.exporters import EXPORTERS
    folder = ROOT / "harness" / "report" / "exporters"
    named = {m.NAME for p in folder.glob("*.py") if p.stem != "__init__"
             for m in [module_of(str(p.relative_to(ROOT)))] if hasattr(m, "NAME")}
    assert named == set(EXPORTERS)


def test_every_wire_module_is_registered():
    from mibench.engines.wires import WIRES
    modules = {p.stem for p in (ROOT / "engines" / "wires").glob("*.py") if p.stem != "__init__"}
    assert {WIRES[name].__module__.rpartition(".")[2] for name in WIRES} == modules


def test_every_command_has_its_module_and_its_docs_section():
    """Every command of the app (and of its sub-apps) is a function of a module of
    harness/commands/, every such module serves one, and docs/cli.md has its section."""
    from mibench.harness.cli import app

    cli_md = (ROOT / "docs" / "cli.md").read_text()
    commands = [(c.name or c.callback.__name__, c.callback) for c in app.registered_commands]
    commands += [(f"{g.name} {c.name or c.callback.__name__}", c.callback)
                 for g in app.registered_groups for c in g.typer_instance.registered_commands]
    used = set()
    for name, callback in commands:
        assert callback.__module__.startswith("mibench.harness.commands."), name
        used.add(callback.__module__.rpartition(".")[2])
        assert f"\n## {name}\n" in cli_md, f"docs/cli.md has no '## {name}' section"
    modules = {p.stem for p in (ROOT / "harness" / "commands").glob("*.py")}
    assert modules - used == {"__init__", "common"}


# controls: each check above can fail


def test_control_a_moved_path_fails():
    moved = DESIGN.replace("- `docs/parity.md`: its batch invariance", "- `docs/checks.md`: its "
                           "batch invariance", 1)
    assert moved != DESIGN
    assert path_problems(moved) != []
    assert recipe_problems(moved, "mode")  # and the recipe no longer names the file


def test_control_an_entry_the_registry_lacks_fails():
    wrong = DESIGN.replace("holding `csv`, `json`, `bmf`", "holding `csv`, `xml`", 1)
    assert "does not hold ['xml']" in " ".join(recipe_problems(wrong, "exporter"))


def test_control_a_file_missing_from_a_recipe_fails():
    line = "- `docs/cli.md`: the programs `mibench compile` builds for it.\n"
    assert line in DESIGN
    problems = recipe_problems(DESIGN.replace(line, "", 1), "mode")
    assert any("does not name ['docs/cli.md']" in p for p in problems)
    assert any("'Files touched: 10' but 9 listed" in p for p in problems)


def test_control_a_file_that_names_no_such_extension_fails():
    added = DESIGN.replace("- `docs/reports.md`: the formats.\n",
                           "- `docs/reports.md`: the formats.\n- `docs/site.md`: none.\n", 1)
    assert any("names ['docs/site.md']" in p for p in recipe_problems(added, "exporter"))

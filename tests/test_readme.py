"""The README: its first two commands, its preset table, and its lines that run the engine
(`score`, `model`, `env`) run for real in a subprocess (slow tier); every other command line of
the README and docs/ is checked in process by tests/test_docs_commands.py."""

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
RUNNABLE = ("score", "model", "env")  # the engine's own: too slow for the in-process test


def _mibench(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *args], capture_output=True,
                          text=True, cwd=tmp_path, env={"HF_HUB_OFFLINE": "1",
                                                        "PATH": "/usr/bin:/bin",
                                                        "PYTHONPATH": str(ROOT),
                                                        "MIBENCH_CACHE": _cache()})


def _cache() -> str:
    from mibench.engines.model_cache import cache_dir

    return str(cache_dir())


def test_readme_starts_with_the_two_commands():
    first = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].endswith("mibench run configs/cpu-smoke.yaml")
    assert first[1].endswith('python -m pytest -q -n 2 -m "not scenario"')
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'python -m pytest -q -n 2 -m "not scenario"' in ci and "ruff check ." in ci
    assert "torch==2.13.0" in ci


@pytest.mark.slow
@pytest.mark.parametrize("command", [c for c in COMMANDS if c.split()[1] in RUNNABLE])
def test_readme_command(command, tmp_path):
    out = _mibench(shlex.split(command)[1:], tmp_path)
    assert out.returncode == 0, out.stderr


def _table(text: str, header: str) -> list[list[str]]:
    body = text.split(header, 1)[1].split("\n\n", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in body.splitlines()[2:]
            if line.startswith("|")]


def test_preset_tables_are_the_presets():
    """docs/models.md's preset table gives every preset's shape; the README's names them all."""
    from mibench.engines.presets import PRESETS

    models = (ROOT / "docs" / "models.md").read_text()
    rows = {row[0].strip("`"): row[2:] for row in _table(models, "| preset | architecture |")}
    shapes = {name: [f"{p[k]:,}" for k in ("hidden_size", "num_hidden_layers")]
              + [f"{p['num_attention_heads']} / {p['num_key_value_heads']}"]
              + [f"{p[k]:,}" for k in ("head_dim", "intermediate_size", "vocab_size")]
              + [p["storage_dtype"]] for name, p in PRESETS.items()}
    assert rows == shapes
    named = {name for row in _table(README, "| preset | shape |")
             for name in re.findall(r"`([^`]+)`", row[0])}
    assert named == set(PRESETS)

# --- the documentation pages (docs/) and every Markdown file of the repository ----------

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKDOWN = [*DOCS, *sorted((ROOT / "configs").glob("*.md")),
            *sorted((ROOT / "reports").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
# `mibench CMD [SUBCMD]` at the start of a command (not `python -m mibench.x`)
MIBENCH = re.compile(r"(?<![\w./-])mibench ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def _prose(text: str) -> str:
    """Markdown without fenced blocks and inline code: where links are links."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file (lower case, punctuation dropped,
    spaces to hyphens, `-N` for repeats)."""
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", path.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        seen[slug] = seen.get(slug, -1) + 1
        if seen[slug]:
            seen[f"{slug}-{seen[slug]}"] = 0
    return set(seen)


def _code(text: str) -> list[str]:
    """Every inline code span and every line of a fenced block, comments cut off."""
    lines = [line.split(" #")[0] for block in FENCE.findall(text)
             for line in block.splitlines()[1:-1]]
    return lines + re.findall(r"`([^`\n]+)`", FENCE.sub("", text))


def _cli():
    """The click command tree of the `mibench` Typer app."""
    import typer

    from mibench.harness.cli import app

    return typer.main.get_command(app)


def _options(command) -> set[str]:
    return {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}


@pytest.mark.parametrize("path", MARKDOWN, ids=_rel)
def test_markdown_names_no_outside_design_notes(path):
    """Users have only the repository: no page may send them to a file outside it (the
    team's DESIGN.md; the repository's own docs/design.md is a page like the others)."""
    text = path.read_text()
    assert "../shared" not in text.lower(), f"{_rel(path)} refers to ../shared"
    assert "DESIGN.md" not in text, f"{_rel(path)} refers to DESIGN.md"


@pytest.mark.parametrize("path", DOCS, ids=_rel)
def test_relative_links_resolve(path):
    """Every relative link of the README and docs/ names a file that exists, and its
    #anchor a heading of that file."""
    broken = []
    for target in LINK.findall(_prose(path.read_text())):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and (dest.is_dir() or dest.suffix != ".md"
                         or anchor not in _anchors(dest)):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{_rel(path)}: broken links: {broken}"


def test_docs_link_every_page():
    """The docs index (docs/README.md) links every page of docs/."""
    index = ROOT / "docs" / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve()
              for t in LINK.findall(_prose(index.read_text()))}
    missing = [_rel(p) for p in DOCS[1:] if p != index and p.resolve() not in linked]
    assert not missing, f"docs/README.md does not link {missing}"


@pytest.mark.parametrize("path", DOCS, ids=_rel)
def test_documented_commands_exist(path):
    """Every `mibench COMMAND` in the README's and the docs' code is a real command (and
    subcommand), and every --option after it is one of that command's options."""
    root, wrong = _cli(), []
    for snippet in _code(path.read_text()):
        for m in MIBENCH.finditer(snippet):
            command = root.commands.get(m[1])
            if command is None:
                wrong.append(f"{m[0]!r}: no command {m[1]!r}")
                continue
            if hasattr(command, "commands"):  # a group: `mibench model make`
                command = command.commands.get(m[2] or "")
                if command is None:
                    wrong.append(f"{m[0]!r}: no subcommand {m[2]!r} of {m[1]!r}")
                    continue
            rest = snippet[m.end():].split(" mibench ")[0]
            wrong += [f"{snippet!r}: {opt} is not an option of {m[1]}"
                      for opt in re.findall(r"(?<![\w-])--[a-z][a-z-]*", rest)
                      if opt not in _options(command)]
    assert not wrong, f"{_rel(path)}: {wrong}"


def test_cli_page_documents_every_command():
    """docs/cli.md names every command of the app, subcommands included."""
    text = (ROOT / "docs" / "cli.md").read_text()
    root = _cli()
    names = [f"{name} {sub}" if hasattr(cmd, "commands") else name
             for name, cmd in root.commands.items()
             for sub in (getattr(cmd, "commands", None) or [None])]
    missing = [n for n in names if f"mibench {n}" not in text]
    assert not missing, f"docs/cli.md does not document {missing}"


def which_command_problems(text: str) -> list[str]:
    """docs/cli.md opens with "Which command when": right after the title, one table row
    for each of compare, ab, bisect, nightly and history, linking its section, with when to
    use it and what it costs in time."""
    head = text.split("\n## ", 2)
    if not text.startswith("# Command line\n\n## Which command when\n") or len(head) < 2:
        return ["docs/cli.md does not open with '## Which command when'"]
    rows = _table(text, "| command | when to use it | what it costs in time |")
    found = {re.match(r"\[`(\w+)", r[0])[1]: r for r in rows if re.match(r"\[`(\w+)", r[0])}
    want = ("compare", "ab", "bisect", "nightly", "history")
    problems = [f"no row for {c}" for c in want if c not in found]
    problems += [f"{c}: no link to #{c} or an empty cell" for c, r in found.items()
                 if f"](#{c})" not in r[0] or not all(r[1:])]
    return problems


def test_cli_page_opens_with_which_command_when():
    assert not which_command_problems((ROOT / "docs" / "cli.md").read_text())


def test_control_which_command_when_missing_or_short_fails():
    text = (ROOT / "docs" / "cli.md").read_text()
    body = text.split("## Which command when", 1)[1].split("\n## ", 1)[1]
    assert which_command_problems("# Command line\n\n## " + body)  # the page before it
    without_ab = "\n".join(line for line in text.splitlines() if not line.startswith("| [`ab "))
    assert which_command_problems(without_ab) == ["no row for ab"]

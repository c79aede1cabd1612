"""The docs' tables of modes are the registry's (engines/modes/registry.py): the README's
mode table, docs/semantics.md's semantics table, its JAX and PyTorch mode tables and its
options table, and the engine, mode and option rows of docs/configs.md's `cases` table.
Each table is parsed and checked row by row against `MODES` (and the options and defaults
it names against each `Mode`'s); the controls drop a row and see the check fail."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from mibench.engines import MODES, OPTIONS

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
SEMANTICS = (ROOT / "docs" / "semantics.md").read_text()
CONFIGS = (ROOT / "docs" / "configs.md").read_text()


def table_after(text: str, marker: str) -> list[list[str]]:
    """The cells of each body row of the first table after `marker` (a heading or the
    header row itself), split at unescaped pipes."""
    after = text.split(marker, 1)[1]
    lines = after[after.index("\n|") + 1:] if not marker.startswith("|") else marker + after
    body = []
    for line in lines.splitlines()[2:]:
        if not line.startswith("|"):
            break
        body.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))])
    return body


def ticked(cell: str) -> list[str]:
    """The names in backticks of a cell (`mask: dense \\| segment` gives `mask`)."""
    return re.findall(r"`(\w+)(?::[^`]*)?`", cell)


def _default(value) -> str:
    return "derived" if value is None else f"`{value}`"


def readme_problems(text: str) -> list[str]:
    """The README's table: the JAX modes, each with its option names."""
    rows = table_after(text, "| mode | options | what it does |")
    found = {ticked(mode)[0]: set(ticked(opts)) for mode, opts, _ in rows}
    want = {name: set(mode.options) for name, mode in MODES["jax"].items()}
    return [] if found == want else [f"README modes {found} != registry {want}"]


def engine_table_problems(text: str, heading: str, engine: str) -> list[str]:
    """A docs/semantics.md engine table: its modes, their options and defaults."""
    found = {}
    for mode, _, options in table_after(text, heading):
        pairs = re.findall(r"`(\w+)` \((`[^`]*`|derived)\)", options)
        found[ticked(mode)[0]] = dict(pairs) if options != "none" else {}
    want = {name: {k: _default(v) for k, v in mode.defaults.items()}
            for name, mode in MODES[engine].items()}
    return [] if found == want else [f"{heading}: {found} != registry {want}"]


def semantics_problems(text: str) -> list[str]:
    """The delimited/plain table: every (engine, mode) of the in-process engines once, and
    a cell for each semantics the mode scores."""
    found, problems = [], []
    for modes, delimited, plain in table_after(text, "| mode | `delimited` | `plain` |"):
        engines = re.search(r"\(([\w, ]+)\)$", modes).group(1).split(", ")
        for name in ticked(modes):
            for engine in engines:
                found.append((engine, name))
                scored = {s for s, cell in (("delimited", delimited), ("plain", plain)) if cell}
                mode = MODES.get(engine, {}).get(name)
                if mode is not None and scored != set(mode.semantics):
                    problems.append(f"{engine}/{name} scores {mode.semantics}, not {scored}")
    want = [(e, m) for e in ("jax", "torch") for m in MODES[e]]
    if sorted(found) != sorted(want):
        problems.append(f"semantics table modes {sorted(found)} != registry {sorted(want)}")
    return problems


def options_problems(text: str) -> list[str]:
    """docs/semantics.md's options table: every option once, a choice's values its own."""
    rows = table_after(text, "| option | values | meaning |")
    found = {ticked(option)[0]: values for option, values, _ in rows}
    problems = [] if set(found) == set(OPTIONS) else [
        f"options {sorted(found)} != registry {sorted(OPTIONS)}"]
    for name, values in found.items():
        option = OPTIONS.get(name)
        if option is not None and option.kind == "choice" and \
                set(ticked(values)) != set(option.choices):
            problems.append(f"{name}: {ticked(values)} != {option.choices}")
    return problems


def configs_problems(text: str) -> list[str]:
    """docs/configs.md's `cases` table: the engines, the engines of one mode, the options."""
    rows = {row[0]: row[1] for row in table_after(text, "| key | meaning |\n|---|---|\n| `engine`")}
    problems = []
    engine_row = next((v for k, v in rows.items() if k == "`engine`"), "")
    if set(ticked(engine_row)) != set(MODES):
        problems.append(f"engines {ticked(engine_row)} != {list(MODES)}")
    one = dict(re.findall(r"`(\w+)`: `(\w+)`", rows.get("`mode`", "")))
    want = {e: next(iter(m)) for e, m in MODES.items() if len(m) == 1}
    if one != want:
        problems.append(f"engines of one mode {one} != {want}")
    options = next((ticked(k) for k in rows if "`mask`" in k), [])
    every = {o for modes in MODES.values() for m in modes.values() for o in m.options}
    if set(options) != set(OPTIONS) or set(options) != every:
        problems.append(f"options {options} != registry {sorted(OPTIONS)}")
    return problems


CHECKS: dict[str, tuple[str, Callable[[str], list[str]], str]] = {
    # name: (the text, its check, a row the control drops)
    "readme": (README, readme_problems, "| `chunked` |"),
    "semantics": (SEMANTICS, semantics_problems, "| `prefill_extend` (jax, torch) |"),
    "jax modes": (SEMANTICS, lambda t: engine_table_problems(
        t, "## Modes of the JAX engine", "jax"), "| `chunked` |"),
    "torch modes": (SEMANTICS, lambda t: engine_table_problems(
        t, "## Modes of the PyTorch reference engine", "torch"),
        "| `single` | one `transformers`"),
    "options": (SEMANTICS, options_problems, "| `schedule` |"),
    "configs": (CONFIGS, configs_problems, "| `engine` |"),
}


@pytest.mark.parametrize("name", CHECKS)
def test_docs_table_is_the_registry(name):
    text, check, _ = CHECKS[name]
    assert check(text) == []


def _without_row(text: str, start: str) -> str:
    """`text` with the first table row that starts with `start` removed (the marker row
    itself kept intact where the table's header is found by it)."""
    lines = text.splitlines(keepends=True)
    i = next(k for k, line in enumerate(lines) if line.startswith(start))
    return "".join(lines[:i] + lines[i + 1:])


@pytest.mark.parametrize("name", CHECKS)
def test_control_a_missing_row_fails(name):
    text, check, row = CHECKS[name]
    if name == "configs":  # the table is found by its engine row: drop the mode row
        row = "| `mode` |"
    assert check(_without_row(text, row)) != []


def test_control_a_wrong_default_or_option_fails():
    jax_check = CHECKS["jax modes"][1]
    assert jax_check(SEMANTICS.replace("`chunk_size` (`32`)", "`chunk_size` (`64`)", 1))
    assert readme_problems(README.replace("`schedule: parallel \\| sequential`, ", "", 1))
    assert options_problems(SEMANTICS.replace("| `dense`, `segment`, `auto` |",
                                              "| `dense`, `segment` |", 1))


def test_control_a_mode_the_docs_lack_fails(monkeypatch):
    import dataclasses

    extra = dataclasses.replace(MODES["torch"]["single"], name="sdpa_single")
    with MODES["torch"].entry("sdpa_single", extra):  # added, then removed
        for name in ("semantics", "torch modes"):
            text, check, _ = CHECKS[name]
            assert check(text) != [], name

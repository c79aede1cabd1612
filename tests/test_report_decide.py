"""`mibench report --summary`: rows by urgency (regressions and failures, then moved scores
and suspicious improvements, then undecided cases, then the rest; within a group the
largest change first), and the page ends with the `mibench ab` command that decides each
undecided case, or says what is missing for one."""

from __future__ import annotations

import fnmatch
import importlib.util
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.records import CaseLoad, read_artifact, write_artifact
from mibench.harness.report import build_context, render_summary

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

BUSY = "jax/chunked/chunk_size=32/tp=1"  # 4.17x slower, on a busy machine: inconclusive
SLOW = "jax/packed/mask=dense/tp=1"  # 1.5x slower, quiet: a regression


def edited():
    """base.json and new.json with BUSY +317% on a busy new side and SLOW +50%."""
    base, new = read_artifact(DATA / "base.json"), read_artifact(DATA / "new.json")
    for c in new.cases:
        if c.case_id in (BUSY, SLOW):
            make.set_times(c, [t * (4.17 if c.case_id == BUSY else 1.5) for t in c.timed_s])
        if c.case_id == BUSY:
            c.load = CaseLoad(window_s=2.0, cpus=2, other_share=0.8, other_cpu_s=3.2,
                              source="/proc")
    return base, new


def table_rows(text: str) -> list[list[str]]:
    """(case, change, verdict) of each row of the summary's verdict table."""
    rows = [[cell.strip() for cell in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    return [[r[0], r[3], r[4]] for r in rows[1:]]


def change(cell: str) -> float:
    return abs(float(re.match(r"([+-][\d.]+)%", cell).group(1)))


def test_rows_by_urgency_then_largest_change():
    base, new = edited()
    rows = table_rows(render_summary(build_context([new], baseline=base)))
    assert rows[0][0] == SLOW and rows[0][2] == "**regression**"
    undecided = [r for r in rows if r[2] in ("inconclusive", "untested")]
    assert undecided[0][0] == BUSY and undecided[0][1].startswith("+317")
    assert rows.index(undecided[0]) == 1  # right after the regression
    sizes = [change(r[1]) for r in undecided]
    assert sizes == sorted(sizes, reverse=True)  # untested and inconclusive mixed, by size
    later = [r[2] for r in rows[1 + len(undecided):]]
    assert set(later) <= {"still failing", "skipped", "improvement", "fixed"}


def test_the_summary_ends_with_the_commands_that_decide(tmp_path):
    base, new = edited()
    write_artifact(base, tmp_path / "base.json")
    write_artifact(new, tmp_path / "new.json")
    out = CliRunner().invoke(app, ["report", str(tmp_path / "new.json"), "--baseline",
                                   str(tmp_path / "base.json"), "--summary"])
    assert out.exit_code == 0, out.output
    text = out.stdout
    assert len(text.splitlines()) <= 40
    block = text.rstrip().split("```bash\n", 1)[1]
    assert block.endswith("```")  # the page ends with it
    commands = [shlex.split(line) for line in block.splitlines()[:-1]]
    first = commands[0]
    assert first == ["mibench", "ab", "1" * 12, "2" * 12, "tests/data/reports/demo.yaml",
                     "--case", BUSY]
    assert f"--case '{BUSY}'" in block
    undecided = {r[0] for r in table_rows(text) if r[2] in ("inconclusive", "untested")}
    globs = [w for words in commands for k, w in enumerate(words) if words[k - 1] == "--case"]
    decided = {cid for cid in undecided if any(fnmatch.fnmatchcase(cid, g) for g in globs)}
    assert decided == undecided and len(commands) == 5  # 4 with one case each, one with the rest


def test_what_is_missing_is_said_instead_of_a_broken_command():
    base, new = edited()
    new.provenance.invocation = None
    text = render_summary(build_context([new], baseline=base))
    assert "mibench ab" not in text.split("**What would decide")[1].replace("`mibench ab`", "")
    assert "not recorded: the config path" in text
    base, new = edited()
    new.provenance.git.commit = base.provenance.git.commit
    text = render_summary(build_context([new], baseline=base))
    assert "```bash" not in text and "both runs measured commit 11111111" in text


def test_a_dirty_side_is_named_beside_the_command():
    base, new = edited()
    new.provenance.git.dirty = True
    text = render_summary(build_context([new], baseline=base))
    assert "```bash" in text and "22222222+ had uncommitted changes" in text

"""`mibench report`: golden reports from fixed artifacts, every section and table, plots, the
commands that reproduce rows, and one-line errors.

Regenerate the golden files after an intended change:
    MIBENCH_REGOLD=1 python -m pytest tests/test_report.py   (rewrites them, then fails)
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand, select_cases
from mibench.harness.records import read_artifact
from mibench.harness.report import SUMMARY_LINES, build_context, write_report
from mibench.harness.report.repro import command

DATA = Path(__file__).parent / "data" / "reports"
REGEN = os.environ.get("MIBENCH_REGOLD") == "1"  # as tests/test_golden_outputs.py
PNG = b"\x89PNG\r\n\x1a\n"

COMMIT_SECTIONS = ["Summary", "Commit comparison", "Results matrix", "Speedups between modes",
                   "A/B: options differing in one key", "Parity", "Topology comparison",
                   "Run-to-run spread", "Environment", "Reproduce"]
MODEL_SECTIONS = ["Summary", "Results matrix", "Speedups between modes", "Parity",
                  "Model matrix", "Run-to-run spread", "Environment", "Reproduce"]


def cli(*args: str):
    return CliRunner().invoke(app, ["report", *args])


def sections(text: str) -> list[str]:
    return re.findall(r"^## (.+)$", text, flags=re.M)


def table_headers(text: str) -> list[str]:
    """The header line of every Markdown table (the line above a `| --- |` rule)."""
    lines = text.splitlines()
    return [lines[i - 1] for i, line in enumerate(lines) if re.match(r"^\| -{3}", line)]


def check_golden(text: str, name: str) -> None:
    """Compare with tests/data/reports/NAME; written only under MIBENCH_REGOLD=1, and then
    the test fails all the same: a golden file is never written by a passing test, and a
    missing one fails rather than passing on what the code produced."""
    golden = DATA / name
    if REGEN:
        golden.write_text(text)
        pytest.fail(f"MIBENCH_REGOLD=1 wrote {name}: review `git diff tests/data/reports`, "
                    "then run without it")
    regen = "MIBENCH_REGOLD=1 python -m pytest tests/test_report.py writes it"
    assert golden.exists(), f"golden file {golden} is missing; {regen}"
    assert text == golden.read_text(), f"{name} changed; {regen}"


def test_missing_golden_fails_and_is_not_written(monkeypatch, tmp_path):
    monkeypatch.setitem(globals(), "DATA", tmp_path)
    monkeypatch.setitem(globals(), "REGEN", False)
    with pytest.raises(AssertionError, match="missing; MIBENCH_REGOLD=1 python -m"):
        check_golden("text", "golden-absent.md")
    assert not (tmp_path / "golden-absent.md").exists()
    monkeypatch.setitem(globals(), "REGEN", True)  # written only when asked, and failing
    with pytest.raises(pytest.fail.Exception, match="MIBENCH_REGOLD=1 wrote golden-absent"):
        check_golden("text", "golden-absent.md")
    assert (tmp_path / "golden-absent.md").read_text() == "text"


@pytest.fixture(scope="module")
def commits_report(tmp_path_factory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("report") / "report.md"
    result = cli(str(DATA / "new.json"), "--baseline", str(DATA / "base.json"), "--out",
                 str(out))
    assert result.exit_code == 0, result.output
    return out.read_text(), out


def test_commit_report_matches_golden_and_has_every_section(commits_report):
    text, _ = commits_report
    check_golden(text, "golden-commits.md")
    assert sections(text) == COMMIT_SECTIONS
    headers = table_headers(text)
    for start in ("| Engine | Mode | Options | TP | Items/s | Latency/item (ms) | "
                  "Compile (s) | MFU |",
                  "| Mode (fastest options) | Items/s | vs jax/single |",
                  "| mask | Items/s |", "| chunk_size | Items/s |", "| extend_batch_size |",
                  "| Check | Case | Against | Max abs diff |",
                  "| Case | 11111111 (baseline) ms/item | 22222222 ms/item | "
                  "Time change [interval] | Evidence | Verdict |",
                  "| Case | Model | TP=1 items/s | TP=4 items/s | Efficiency TP=4 |",
                  "| Case | Runs | Median (s) |", "| Field | 11111111 | 22222222 |",
                  "| Case | Command |"):
        assert any(h.startswith(start) for h in headers), start
    assert len(headers) == 1 + 2 + 6 + 1 + 1 + 1 + 1 + 1 + 1


def test_report_says_what_the_seeds_say(commits_report):
    text, _ = commits_report
    verdict = text.split("## Summary\n\n", 1)[1].splitlines()[0]
    assert verdict.startswith("**UNTESTED** against 11111111: 2 of 13 compared case(s)")
    assert "torch/single/tp=1: time +0.9% [-9.6%, +12.7%] (99% interval" in verdict
    assert "11 inconclusive" in verdict and "`mibench ab`" in verdict
    assert "**FAILED** `ValueError: Specified dims (1, 8, 2) do not evenly divide" in text
    assert "**OOM** `XlaRuntimeError: RESOURCE_EXHAUSTED" in text
    assert "| segment | 115.93 | 8.63 | 2.24x | ok |" in text  # dense vs segment A/B
    assert "| jax/chunked (chunk_size=32) | qwen3-0.6b | 70.49 | 141.03 | 0.50 |" in text
    assert "**run 4: 2.07 s (2.3x)**" in text  # the tail pause at extend batch 16
    assert ("| 9.523 | 8.626 | -9.4% [-18.7%, +0.9%] | 99% CI, floor 3%, 1+1 proc, 5+5 runs "
            "| inconclusive |") in text
    assert "| -1.3% (untested) | 1+1 timed runs: at least 3" in text
    assert "<details><summary>15 passing parity check(s)</summary>" in text


def test_plots_exist_and_are_png(commits_report):
    text, out = commits_report
    for name in ("throughput", "spread", "commits"):
        png = out.parent / f"report-{name}.png"
        assert png.stat().st_size > 1000 and png.read_bytes()[:8] == PNG
        assert f"]({png.name})" in text


def test_model_matrix_report_matches_golden(tmp_path):
    text = write_report([read_artifact(DATA / "models.json")], tmp_path / "models.md")
    check_golden(text, "golden-models.md")
    assert sections(text) == MODEL_SECTIONS
    assert "| Model | Mode | TP | N=8 | N=32 | N=128 |" in text
    assert "| qwen3-0.6b | jax/packed (mask=segment) | 1 | 42.19 (3.98x) |" in text
    assert "| qwen2.5-1.5b | jax/single | 1 | **FAILED** |" in text
    assert "| Model | isolation (same_length) max | isolation (changed_length) max | " \
           "modes max |" in text
    assert (tmp_path / "models-throughput.png").read_bytes()[:8] == PNG


def test_sections_appear_only_with_data():
    rec = read_artifact(DATA / "new.json")
    rec.cases = [c for c in rec.cases if c.case_id == "jax/single/tp=1"]
    rec.parity = None
    text = write_report([rec], None)
    assert sections(text) == ["Summary", "Results matrix", "Environment", "Reproduce"]
    assert "no baseline to compare with" in text and "![" not in text


def test_regression_verdict_in_summary():
    base = read_artifact(DATA / "base.json")
    new = read_artifact(DATA / "new.json")
    new.cases[3].status = "failed"
    ctx = build_context([new], baseline=base)
    assert ctx["summary"]["verdict"].startswith("**REGRESSION** against 11111111: 1 case(s) "
                                                "failed the gate (1 failed): jax/chunked/")
    assert "12 case(s) compared: " in ctx["summary"]["verdict"]  # ok on both sides
    assert "newly failed" in ctx["summary"]["regressions"][0]


@pytest.mark.parametrize("artifact", ["new.json", "models.json"])
def test_reproduce_commands_select_exactly_their_case(artifact):
    rec = read_artifact(DATA / artifact)
    for case in rec.cases:
        words = shlex.split(command(rec, case))
        assert words[:3] == ["mibench", "run", "tests/data/reports/" + artifact.replace(
            "new.json", "demo.yaml").replace("models.json", "models.yaml")]
        sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
        globs = [words[i + 1] for i, w in enumerate(words) if w == "--case"]
        (spec,) = select_cases(expand(load_config(Path(__file__).parent.parent / words[2],
                                                  sets)), globs)
        assert (spec.engine, spec.mode, spec.params, spec.tp, spec.model, spec.dtype) == (
            case.engine, case.mode, case.params, case.topology.tp, case.model.path,
            case.model.dtype)
        assert spec.workload.as_dict() == case.workload.as_dict()
        assert spec.runs.timed == case.runs.timed


def test_report_to_stdout_without_out():
    result = cli(str(DATA / "new.json"))
    assert result.exit_code == 0 and result.output.startswith("# mibench report: v6e-demo")


@pytest.mark.parametrize("args", [["nope.json"], [str(DATA)], [str(DATA / "demo.yaml")],
                                  [str(DATA / "new.json"), "--baseline", "nope.json"],
                                  [str(DATA / "new.json"), "--threshold", "much"]])
def test_bad_input_is_one_line_and_exit_2(args):
    result = cli(*args)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error: ") and "Traceback" not in result.output


def test_real_artifact_report(tmp_path):
    """A real `mibench run configs/cpu-smoke.yaml` artifact: sections and runnable commands."""
    rec = read_artifact(DATA / "real-smoke.json")
    text = write_report([rec], tmp_path / "real.md")
    assert sections(text) == ["Summary", "Results matrix", "Speedups between modes",
                              "A/B: options differing in one key", "Parity",
                              "Run-to-run spread", "Environment", "Reproduce"]
    assert "### mask: dense vs segment (jax/packed, tiny, float32, tp=1, 16 items)" in text
    for case in rec.cases:
        words = shlex.split(command(rec, case))
        assert words[2] == "configs/cpu-smoke.yaml"
        sets = [words[i + 1] for i, w in enumerate(words) if w == "--set"]
        globs = [words[i + 1] for i, w in enumerate(words) if w == "--case"]
        (spec,) = select_cases(expand(load_config(Path(__file__).parent.parent / words[2],
                                                  sets)), globs)
        assert spec.case_id == case.case_id


def test_first_artifact_is_the_baseline_of_later_commits():
    base, new = read_artifact(DATA / "base.json"), read_artifact(DATA / "new.json")
    text = write_report([base, new], None)
    assert "## Commit comparison" in text and "| 11111111 (baseline) ms/item |" in text
    assert "| Commit | Engine |" in text  # one matrix, a column per commit
    assert "Every row: Hardware: TPU v6 lite x4; Items: 500." in text  # said once, above
    assert "## Commit comparison" not in write_report([new, new], None)  # same commit


def test_summary_variant_links_no_images(tmp_path):
    out = tmp_path / "summary.md"
    result = cli(str(DATA / "new.json"), "--baseline", str(DATA / "base.json"), "--summary",
                 "--out", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "![" not in text and not list(tmp_path.glob("*.png"))
    assert text.splitlines()[2].startswith("**UNTESTED** against 11111111")  # verdict first
    assert "| Case | Base ms/item | New ms/item | Time change [interval] | Verdict |" in text
    assert len(text.splitlines()) <= SUMMARY_LINES


def test_failing_parity_rows_stay_outside_the_fold():
    rec = read_artifact(DATA / "new.json")
    rec.parity.checks[0].status = "failed"
    parity = write_report([rec], None).split("## Parity\n", 1)[1].split("\n## ", 1)[0]
    shown, folded = parity.split("<details>")
    assert "**FAILED**" in shown and "**FAILED**" not in folded
    assert "<summary>14 passing parity check(s)</summary>" in folded


def test_parity_log_differences_lead_with_three_digits():
    rec = read_artifact(DATA / "new.json")
    for c in rec.parity.checks:
        c.max_log_diff = 1.05e-6 if c is rec.parity.checks[0] else 0.0
    rec.parity.checks[0].status = "failed"
    parity = write_report([rec], None).split("## Parity\n", 1)[1]
    assert "| Check | Case | Against | Max abs ln diff | Max abs diff |" in parity
    assert "| 1.05e-06 | 0 | 0 | - | 0 | **FAILED** |" in parity

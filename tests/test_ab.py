"""`mibench ab` and `bisect` on a scratch git repository built from this project: the
engines of each revision run in their own workers, rounds interleave, and the verdict
catches a commit that makes `single` 3x slower, one that moves scores, and says nothing
for an A/A run."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from mibench.harness.ab.bisect import bisect
from mibench.harness.ab.rounds import exit_code, run_ab
from mibench.harness.ab.scratch import append, commit, copy_project, git, slower
from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.records.ab import AB_SCHEMA_FILE, read_ab
from mibench.harness.testing import write_config

pytestmark = pytest.mark.slow  # worker processes of two revisions

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """
name: ab
model: {path: "embedded:tiny"}
workload: {query_tokens: 32, num_items: 3, item_tokens: 4, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 5}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed, mask: segment}
"""
SINGLE = "engines/modes/single.py"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """old (no engine contract), base, docs, slow (single 3x), after, scores (moved), and
    on a side branch broken (engines without load_engine, which the workers build with). The
    workers share a JAX compilation cache (both revisions compile the same programs)."""
    repo = tmp_path_factory.mktemp("scratch")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("JAX_COMPILATION_CACHE_DIR", str(repo.parent / "jax-cache"))
        env.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
        yield _build(repo)


def _build(repo):
    copy_project(ROOT, repo)
    contract = (repo / "engines/contract.py").read_text()
    (repo / "engines/contract.py").unlink()
    shas = {"old": commit(repo, "before the contract")}
    (repo / "engines/contract.py").write_text(contract)
    shas["base"] = commit(repo, "base")
    (repo / "NOTES").write_text("docs\n")
    shas["docs"] = commit(repo, "docs only")
    append(repo, SINGLE, slower("score_single", 3.0))
    shas["slow"] = commit(repo, "single 3x slower")
    (repo / "NOTES").write_text("more docs\n")
    shas["after"] = commit(repo, "after")
    text = (repo / SINGLE).read_text()
    old = "    return np.concatenate([to_host(r) for r in rows])"
    assert old in text
    (repo / SINGLE).write_text(text.replace(old, old + " * 1.001", 1))
    shas["scores"] = commit(repo, "scores moved")
    git(repo, "checkout", "-q", "-b", "side")  # off the first-parent line of HEAD
    init = (repo / "engines/__init__.py").read_text()
    assert "def load_engine(" in init
    (repo / "engines/__init__.py").write_text(init.replace("def load_engine(", "def build("))
    shas["broken"] = commit(repo, "engines without load_engine")
    git(repo, "checkout", "-q", "-")
    return repo, shas


def ab(scratch, tmp_path, base, new, rounds=3, case=None, interleave=True):
    repo, shas = scratch
    config = load_config(write_config(tmp_path, CONFIG))
    return run_ab(config, repo, shas[base], shas[new], repo.parent / "cache",
                  rounds=rounds, case_glob=case, out=tmp_path / "out", interleave=interleave,
                  note=lambda line: None)


# a long scenario (nox -s scenarios); its small version:
# test_moved_scores_are_a_regression (real workers of two revisions)
@pytest.mark.scenario
def test_a_a_finds_no_regression(scratch, tmp_path):
    record, path = ab(scratch, tmp_path, "base", "docs")
    assert record.verdict == "pass" and exit_code(record) == 0
    assert record.pacing == "calls"
    assert {c.verdict for c in record.cases} <= {"unchanged", "inconclusive"}
    for c in record.cases:
        assert len(c.base) == len(c.new) == 3 and c.scores.max_log_diff == 0.0
        # each side of each round records how busy the machine was (faked in the tests)
        assert all(s.load is not None and s.load.source.startswith("fake")
                   for s in c.base + c.new)
        assert [s.first for s in c.base] == [True, False, True]  # the order alternates
    assert read_ab(path).model_dump() == record.model_dump()
    jsonschema.validate(json.loads(path.read_text()), json.loads(AB_SCHEMA_FILE.read_text()))


def test_moved_scores_are_a_regression(scratch, tmp_path):
    """With the sides of a round one after the other (as on a GPU or TPU)."""
    record, _ = ab(scratch, tmp_path, "after", "scores", rounds=1, case="jax/single*",
                   interleave=False)
    assert record.pacing == "sides"
    (single,) = record.cases
    assert single.verdict == "regression" and "scores moved" in single.why
    assert single.scores.max_log_diff == pytest.approx(0.001, rel=0.01)


def test_a_revision_before_the_engine_contract_is_refused(scratch, tmp_path):
    from mibench.engines import MibenchError

    repo, shas = scratch
    with pytest.raises(MibenchError, match=f"oldest revision that can be measured is "
                                           f"{shas['base'][:12]}"):
        ab(scratch, tmp_path, "old", "base")


def test_a_revision_whose_engines_the_workers_cannot_import_is_refused(scratch, tmp_path):
    from mibench.engines import MibenchError

    repo, shas = scratch
    with pytest.raises(MibenchError, match=f"{shas['broken'][:12]} has engines this "
                                           "harness's workers cannot import .*load_engine"
                                           f".*oldest revision that can be measured is "
                                           f"{shas['base'][:12]}"):
        ab(scratch, tmp_path, "base", "broken")


# a long scenario (nox -s scenarios); its small version:
# tests/test_bisect.py (the search over a fake ab)
@pytest.mark.scenario
def test_bisect_finds_the_slow_commit(scratch, tmp_path):
    """Real workers and worktrees: from docs (good) to after (bad), bisect measures the bad
    end (3 rounds, its level: 3x on the single case) and names the slow commit without a
    run: `after` only changed NOTES, so `slow` is the only commit that changed engines/.
    Steps judged by level, partial steps and the rounds' looks are test_bisect.py's and
    test_sequential.py's (the same search over made-up rounds)."""
    repo, shas = scratch
    config = load_config(write_config(tmp_path, CONFIG))
    lines = []
    found = bisect(config, repo, shas["docs"], shas["after"], repo.parent / "cache",
                   case_glob="jax/single*", rounds=3, max_rounds=6, note=lines.append)
    assert found["candidates"] == 2 and found["verdict"] == "found", lines
    assert [s["verdict"] for s in found["steps"]] == ["regression"], lines
    assert [s["commit"] for s in found["steps"]] == [shas["after"]], lines
    assert found["first_bad"] == shas["slow"] and found["skipped"] == 1, lines
    assert found["how"] == "the only commit that changes the measured code"
    assert found["culprits"][0]["change"]["jax/single/tp=1"] > 1.0  # about +200%
    assert any(line.startswith("step 1:") for line in lines)
    assert any("1 of 2 commits change the measured code" in line for line in lines)


def test_a_slower_commit_is_a_regression_with_its_interval(scratch, tmp_path, monkeypatch):
    """Through the command line: exit 1, the verdict line, the artifact and its report."""
    repo, shas = scratch
    monkeypatch.chdir(repo)
    monkeypatch.setenv("MIBENCH_CACHE", str(repo.parent / "cache"))
    config = write_config(tmp_path, CONFIG)
    result = CliRunner().invoke(app, ["ab", shas["base"], shas["slow"], str(config),
                                      "--rounds", "4", "--case", "jax/single*",
                                      "--out", str(tmp_path / "o")])
    assert result.exit_code == 1, result.output
    assert "verdict: regression" in result.output
    (art,) = (tmp_path / "o").glob("*.json")
    (single,) = read_ab(art).cases
    assert single.verdict == "regression", single.why
    # ~3x; the interval's width depends on the machine's load: only that it excludes 0
    assert single.timing.change > 0.5 and single.timing.low > 0
    report = CliRunner().invoke(app, ["report", str(art), "--out", str(tmp_path / "ab.md")])
    assert report.exit_code == 0, report.output
    md = (tmp_path / "ab.md").read_text()
    assert "**Verdict: regression**" in md and "paired t-test on per-round log ratios" in md
    assert "jax/single/tp=1" in md and "<details>" in md
    bad = CliRunner().invoke(app, ["ab", "nope", shas["slow"], str(config)])
    assert bad.exit_code == 2 and "nope" in bad.output

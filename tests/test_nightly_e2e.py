"""One nightly end to end, measured: a scratch clone of the engines, a night that seeds the
history, a commit that makes prefill_extend 2x as long, and a night whose run is faked
busy (so the history cannot judge it and `ab` must): `ab` (3 rounds; 6 more only where a
loaded machine left 3 undecided) confirms it, the only commit since the last pass is named
as the culprit with no bisect, exit 1, a summary of at most 40 lines, the index knows it.
Workers, worktrees and `ab` are real; the tiny model, one case, a shared JAX compilation
cache."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.ab.scratch import append, commit, copy_project, slower
from mibench.harness.cli import app
from mibench.harness.records.nightly import NightSummary, read_index
from mibench.harness.testing import write_config

PROJECT = Path(__file__).resolve().parents[1]
CONFIG = """
name: nightly-e2e
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 32, num_items: 8, item_tokens: 4, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 1, timed: 5, timeout_s: 120}
cases:
  - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
"""


# a long scenario (nox -s scenarios); its small version:
# tests/test_nightly_rules.py (every rule over fake steps)
@pytest.mark.scenario
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_nightly_confirms_a_2x_slowdown_and_names_its_commit(tmp_path, monkeypatch):
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    # the nine workers (two seeding runs, the night's run, three rounds of two sides)
    # compile the same programs: one JAX compilation cache, as tests/test_ab.py does
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax-cache"))
    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    repo, history = tmp_path / "repo", tmp_path / "history"
    repo.mkdir()
    copy_project(PROJECT, repo)
    good = commit(repo, "main")
    config = write_config(tmp_path, CONFIG)
    night = ["nightly", str(config), "--history", str(history), "--repo", str(repo),
             "--rounds", "3", "--max-rounds", "6", "--seed-runs", "2"]
    seeded = CliRunner().invoke(app, night)
    assert seeded.exit_code == 0, seeded.output
    assert read_index(history / "index.json").baseline.commit == good
    append(repo, "engines/modes/extend.py", slower("score_prefill_extend", 2.0))
    bad = commit(repo, "prefill_extend 2x as long")
    monkeypatch.setenv("MIBENCH_FAKE_OTHER_LOAD", "0.9")  # the run says nothing: ab decides
    result = CliRunner().invoke(app, night)
    assert result.exit_code == 1, result.output
    summary = result.stdout
    assert len(summary.splitlines()) <= 40
    assert "confirmed regression" in summary and f"`{bad[:12]}`" in summary
    index = read_index(history / "index.json")
    (known,) = index.known
    assert known.culprit == bad and known.good == good and known.change > 0.5
    assert index.baseline.commit == good  # not promoted
    pairs = {tuple(p.name.split("-")[1:3]) for p in (history / "ab").glob("ab-*.json")}
    assert pairs == {(good[:8], bad[:8])}  # confirmed between the two
    (twin,) = (history / "nights").glob(f"*-{bad[:12]}/summary.json")
    (culprit,) = NightSummary.model_validate_json(twin.read_text()).culprits
    assert culprit.bisect == f"the only commit since {good[:12]}"  # nothing to bisect

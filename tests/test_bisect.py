"""`mibench bisect` judges each step by the level its A/B rounds against GOOD sit at (near
GOOD, near BAD, between): a step left undecided gets more rounds within `--max-rounds`,
and a search left undecided names no commit (exit 2, saying what would decide it).

Each step's A/B rounds are given here (per-round new/base ratios, judged by `ab`'s own
judge, ab/rounds.judge, whose round log ratios the search reads), so only the worker
processes are left out; test_ab.py runs the real thing, tests/test_sequential.py the
search's error rates."""

from __future__ import annotations

import types
from pathlib import Path

import nightly_fakes
import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.ab import bisect as bisect_module
from mibench.harness.ab.bisect import bisect
from mibench.harness.ab.rounds import case_verdict
from mibench.harness.ab.scratch import commit, git
from mibench.harness.ab.search import WORDS
from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.records.ab import ABCase
from mibench.harness.testing import write_config

CONFIG = """
name: bisect
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 2, item_tokens: 2, label_token_ids: [198]}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
"""
SLOW = [2.0, 2.1, 1.9, 2.05, 1.95, 2.0, 2.1, 1.9]  # 2x slower, every round
SAME = [1.0, 1.01, 0.99, 1.0, 1.01, 0.99, 1.0, 1.0]
# the issue's evidence: +1042.6% [-95.0%, +258872.2%] at 3 rounds, never narrower here
WIDE = [4.43, 11.43, 29.5] + [0.05, 20.0] * 30


def judged(ratios: list[float]) -> ABCase:
    """A case whose rounds have these new/base ratios, judged by `ab`'s judge."""
    return nightly_fakes.judged("jax/single/tp=1", ratios, mode="single",
                                model="embedded:tiny", dtype="float32")


@pytest.fixture
def history(tmp_path, monkeypatch):
    """A repository of six commits after `good`; `set(behaviour)` says each commit's
    rounds (a list of ratios, cut to the rounds asked for); the rounds each A/B asked
    for are kept in `asked`."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    shas = []
    for i in range(7):  # each commit changes the measured code (engines/)
        (repo / "engines").mkdir(exist_ok=True)
        (repo / "engines" / "version.py").write_text(f"VERSION = {i}\n")
        shas.append(commit(repo, f"commit {i}"))
    asked: list[tuple[str, int]] = []
    state = {}

    def fake_ab(config, repo_, good, sha, cache, *, rounds, case_glob, note, **kw):
        asked.append((sha, rounds))
        done = sum(r for s_, r in asked[:-1] if s_ == sha)  # rounds given before: the next
        ratios = state["behaviour"][shas.index(sha)][done:done + rounds]
        return types.SimpleNamespace(cases=[judged(ratios)]), None

    monkeypatch.setattr(bisect_module, "run_ab", fake_ab)
    config = load_config(write_config(tmp_path, CONFIG))

    def search(behaviour, **kw):
        state["behaviour"] = behaviour
        return bisect(config, repo, shas[0], shas[-1], tmp_path / "cache",
                      case_glob=["jax/*"], **{"note": lambda line: None, **kw})

    return types.SimpleNamespace(shas=shas, asked=asked, search=search, repo=repo,
                                 config=write_config(tmp_path, CONFIG))


def test_the_evidence_is_as_wide_as_the_issue_says_and_ab_calls_it_inconclusive():
    case = judged(WIDE[:3])
    assert case.timing.change == pytest.approx(10.43, rel=1e-3)
    assert case.timing.low < -0.9 and case.timing.high > 2000
    assert case_verdict(case) == "inconclusive"
    assert case_verdict(judged(SLOW[:5])) == "regression"
    assert case_verdict(judged(SAME[:5])) == "unchanged"


def test_a_clear_history_names_the_first_slow_commit(history):
    """Control: with decided steps the search names commit 4 (the first 2x one)."""
    found = history.search([SAME] * 4 + [SLOW] * 3, rounds=5)
    assert found["verdict"] == "found" and found["first_bad"] == history.shas[4]
    assert "ab: regression: +" in found["evidence"]["jax/single/tp=1"]
    assert all(rounds == 5 for _, rounds in history.asked)  # nothing re-measured


def test_each_step_says_which_of_at_most_how_many_and_what_it_concluded(history):
    """A user watching a bisect sees each step's commit, its number of the most the
    binary search can take, and its word, as it goes."""
    lines: list[str] = []
    found = history.search([SAME] * 4 + [SLOW] * 3, rounds=5, note=lines.append)
    assert found["first_bad"] == history.shas[4]
    (plan,) = [line for line in lines if line.startswith("bisect: ")]
    assert plan == ("bisect: 6 commit(s) to search: at most 3 more A/B step(s) to the first "
                    "that made the change")
    steps = [line for line in lines if line.startswith("step ")]
    assert steps[0].startswith("step 1: ")  # BAD against GOOD: before the range is known
    most = 1 + 3
    for k, line in enumerate(steps[1:], 2):
        assert line.startswith(f"step {k} of at most {most}: "), line
        assert line.split(": ", 1)[1][:12] in {s[:12] for s in history.shas}
        assert line.split("': ")[1].split(" (")[0] in WORDS.values(), line
    assert len(steps) <= most


def test_a_wide_interval_names_no_commit(history):
    """Commit 3 (the first step) is wide: before, it counted as `no change` and the
    search went on past it, naming a later commit."""
    found = history.search([SAME] * 3 + [WIDE] + [SLOW] * 3, rounds=3, max_rounds=3)
    assert found["verdict"] == "inconclusive" and found["first_bad"] is None
    assert found["undecided"]["commit"] == history.shas[3]
    assert "ab: inconclusive: " in found["undecided"]["evidence"]["jax/single/tp=1"]
    assert "--rounds 12" in found["decide"] and "--max-rounds 12" in found["decide"]


def test_an_undecided_step_gets_more_rounds_within_the_budget(history):
    """A step undecided at 3 rounds gets 3 more (6 in all), then 6 more (12), not 24
    (--max-rounds 12): the rounds accumulate, each look judging all of them."""
    found = history.search([SAME] * 3 + [WIDE] + [SLOW * 2] * 3, rounds=3, max_rounds=12)
    assert found["verdict"] == "inconclusive"
    assert [r for sha, r in history.asked if sha == history.shas[3]] == [3, 3, 6]
    history.asked.clear()
    # a step that more rounds decide: undecided at 3 and 6 rounds, near BAD's level at 12
    noisy = [1.0, 2.0, 2.0] + [2.0] * 9
    found = history.search([SAME] * 3 + [noisy] + [SLOW * 2] * 3, rounds=3, max_rounds=12)
    assert [r for sha, r in history.asked if sha == history.shas[3]] == [3, 3, 6]
    assert found["verdict"] == "found" and found["first_bad"] == history.shas[3]


def test_bad_itself_undecided_is_no_search(history):
    found = history.search([SAME] * 6 + [WIDE], rounds=3, max_rounds=3)
    assert found["verdict"] == "inconclusive" and len(found["steps"]) == 1
    with pytest.raises(MibenchError, match="nothing to bisect"):
        history.search([SAME] * 7, rounds=3)


def test_the_command_exits_2_naming_what_would_decide(history, monkeypatch):
    monkeypatch.chdir(history.repo)
    history.search([SAME] * 3 + [WIDE] + [SLOW] * 3, rounds=3, max_rounds=3)  # behaviour
    out = CliRunner().invoke(app, ["bisect", history.shas[0], history.shas[-1],
                                   str(history.config), "--case", "jax/*", "--rounds", "3",
                                   "--max-rounds", "6"])
    assert out.exit_code == 2, out.output
    line = out.stderr.strip().splitlines()[-1]  # after the steps
    assert line.startswith(f"error: {history.shas[3][:12]}: 'commit 3' stayed inconclusive")
    assert "no first bad commit is named" in line and "--max-rounds 24" in line
    assert "first bad commit:" not in out.stdout
    assert "step 2 of at most 4:" in out.stderr  # each step is printed, of how many


def test_max_rounds_is_checked_before_anything_runs():
    out = CliRunner().invoke(app, ["bisect", "a", "b", "none.yaml", "--case", "x",
                                   "--rounds", "5", "--max-rounds", "4"])
    assert out.exit_code == 2 and "--max-rounds: must be at least --rounds (5)" in out.stderr
    out = CliRunner().invoke(app, ["bisect", "a", "b", "none.yaml", "--case", "x",
                                   "--max-rounds", "5000"])
    assert out.exit_code == 2 and "--max-rounds: 5000 is more than 1000" in out.stderr


def test_bisect_docs_state_the_flag_and_exit_code():
    docs = (Path(__file__).resolve().parents[1] / "docs/cli.md").read_text()
    section = docs.split("## bisect", 1)[1].split("\n## ", 1)[0]
    assert "--max-rounds" in section and "exit 2" in section and "inconclusive" in section


def test_the_scratch_wrappers_stack_when_appended_twice():
    """The partial-step scenario appends `slower` twice to one module: each wrapper wraps
    the one before it (a module-level alias made the first wrapper call itself: a
    RecursionError in the scenario's run), and the sleeps add up."""
    from mibench.harness.ab.scratch import allocating, same_scores, slower

    calls = []
    module = {"f": lambda x: calls.append(x) or [[x, 1.0], [x + 1, 2.0]]}
    exec(slower("f", 1.0) + slower("f", 1.0) + allocating("f", 16), module)
    assert module["f"](3) == [[3, 1.0], [4, 2.0]] and calls == [3]
    exec(same_scores("f"), module)
    assert module["f"](5).tolist() == [[5, 1.0], [5, 1.0]] and calls == [3, 5]

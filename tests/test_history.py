"""`mibench history`: commit ordering, change points on a synthetic step, none on flat noise,
peak vs current, trend plots, and one-line errors."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.judge.history import build_history, load_dir
from mibench.harness.records import write_artifact
from mibench.harness.report.changes import history_json
from mibench.harness.stats.changepoint import Params, binary_segmentation

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)

CASE = "jax/packed/mask=segment/tp=1"
N = 12


def cli(*args: str):
    return CliRunner().invoke(app, ["history", *args])


def write_history(folder: Path, factors: list[float], seed: int = 0) -> list[str]:
    """One artifact per fake commit c00, c01, ...: CASE takes `factors[i]` x its time.
    File names are shuffled so that only the recorded times can give the order."""
    commits = []
    for i, factor in enumerate(factors):
        rec = make.build("demo.yaml", f"c{i:02d}", seed * 100 + i, make.demo_time,
                         f"2026-03-{i + 1:02d}T03:00:00Z")
        rec = make.scaled(rec, CASE, factor)
        write_artifact(rec, folder / f"{(i * 7) % len(factors):02d}-{rec.run_id}.json")
        commits.append(rec.provenance.git.commit[:8])
    return commits


@pytest.fixture(scope="module")
def step(tmp_path_factory) -> tuple[Path, list[str]]:
    """Throughput drops to half at the 8th commit (index 7), with 3% noise."""
    folder = tmp_path_factory.mktemp("step")
    rng = np.random.default_rng(7)
    factors = [(1.0 if i < 7 else 2.0) * (1 + 0.03 * rng.standard_normal()) for i in range(N)]
    return folder, write_history(folder, factors)


def test_step_change_found_at_the_right_commit(step):
    folder, commits = step
    hist = build_history(load_dir(folder).records)
    series = {s.case_id: s for s in hist.series}
    s = series[CASE]
    assert [p.label for p in s.points] == commits  # ordered by time, not by file name
    assert [s.points[c.index].label for c in s.change_points] == [commits[7]]
    cp = s.change_points[0]  # time per item doubled: + = slower; items/s halved
    assert cp.latency_change == pytest.approx(1.0, abs=0.1) and cp.verdict == "regression"
    assert cp.items_per_s_change == pytest.approx(-0.5, abs=0.05)
    others = [x for x in hist.series if x.case_id != CASE and x.change_points]
    assert others == []  # 1% run noise, no step: no change point anywhere else
    assert s.peak.label in commits[:7] and s.current.label == commits[-1]


def test_flat_noisy_history_has_no_change_point(tmp_path):
    rng = np.random.default_rng(11)
    write_history(tmp_path, list(1 + 0.05 * rng.standard_normal(N)), seed=1)
    hist = build_history(load_dir(tmp_path).records, case=CASE)
    assert [s.change_points for s in hist.series] == [[]]


def test_changepoint_method_false_positives_and_power():
    flat = sum(bool(binary_segmentation(list(100 + 10 * np.random.default_rng(s)
                                             .standard_normal(20)))) for s in range(100))
    assert flat <= 3  # alpha = 0.01
    rng = np.random.default_rng(3)
    values = list(np.r_[100 + 2 * rng.standard_normal(10), 80 + 2 * rng.standard_normal(10)])
    assert [c.index for c in binary_segmentation(values)] == [10]
    assert binary_segmentation([5.0] * 12) == []
    assert binary_segmentation([1.0, 2.0]) == []
    two_steps = list(np.r_[np.full(8, 100.0), np.full(8, 80.0), np.full(8, 60.0)]
                     + rng.standard_normal(24))
    assert [c.index for c in binary_segmentation(two_steps, Params(min_size=3))] == [8, 16]


def test_markdown_names_method_and_writes_trend_plots(step, tmp_path):
    folder, commits = step
    out = tmp_path / "history.md"
    result = cli(str(folder), "--case", CASE, "--out", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "binary segmentation with Welch's t statistic" in text
    assert "alpha=0.01, min_size=3, min_change=5%, permutations=999" in text
    assert f"at {commits[7]}:" in text and "change point" in text
    png = tmp_path / "history-trends.png"  # one figure: a panel per case of the config
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
    assert "](history-trends.png)" in text and not list(tmp_path.glob("*-trend-*.png"))
    assert "time +" in text  # change points in the one convention: + = slower


def test_json_output(step):
    folder, commits = step
    result = cli(str(folder), "--case", CASE, "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["schema"] == "mibench.history/2" and data["params"]["alpha"] == 0.01
    (series,) = data["series"]
    (step,) = series["steps"]
    assert step["index"] == 7 and step["kind"] == "change point"
    assert step["verdict"] == "regression" and step["latency_change"] > 0.5
    assert step["items_per_s_change"] < -0.3
    assert series["peak"]["items_per_s"] > series["current"]["items_per_s"]


def test_orders_by_commit_time_from_git(tmp_path):
    """Artifacts of real commits of this repository sort by commit time, not by run time."""
    repo = Path(__file__).parent.parent
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H", "-3"],
                         capture_output=True, text=True)
    commits = log.stdout.split()[::-1]  # oldest first
    if log.returncode != 0 or len(commits) < 3:
        pytest.skip("needs a git checkout with 3 commits")
    write_runs_at(commits, repo, tmp_path)
    hist = build_history(load_dir(tmp_path).records, case=CASE)
    assert [p.commit for p in hist.series[0].points] == commits
    assert json.loads(history_json(hist))["artifacts"] == 3


@pytest.mark.parametrize("kind", ["missing", "empty", "bad", "case"])
def test_bad_input_is_one_line_and_exit_2(tmp_path, kind):
    args = {"missing": [str(tmp_path / "nope")], "empty": [str(tmp_path)],
            "bad": [str(tmp_path)], "case": [str(DATA), "--case", "no/such/case"]}[kind]
    if kind == "bad":
        (tmp_path / "x.json").write_text("{}")
    result = cli(*args)
    assert result.exit_code == 2
    assert len(result.output.strip().splitlines()) == 1
    assert result.output.startswith("error: ") and "Traceback" not in result.output


def test_git_asked_twice_per_checkout_per_build_never_across_builds(monkeypatch):
    """Three artifacts each of five commits of one checkout: one `git cat-file` and one
    `git log` in a build, whatever the number of commits (a process per commit cost seconds
    on a year of nights); no `rev-list`, since no two commit times tie; the next build asks
    again, so a long-lived process sees history rewritten."""
    shas = [c * 40 for c in "abcde"]
    times = {sha: f"2026-01-0{i + 1}T00:00:00+00:00" for i, sha in enumerate(shas)}
    calls = []

    def fake_git(where, *args, stdin=None):
        calls.append(args[0])
        asked = stdin.split()
        if args[0] == "cat-file":
            return "\n".join(f"{sha} commit 200" for sha in asked)
        return "\n".join(f"{sha} {times[sha]}" for sha in asked) if args[0] == "log" else None

    monkeypatch.setattr("mibench.harness.judge.commits.git_output", fake_git)
    records = []
    for i, commit in enumerate(shas * 3):
        rec = make.build("demo.yaml", "x", i, make.demo_time, f"2026-04-{20 - i:02d}T03:00:00Z")
        rec.provenance.git.commit = commit
        records.append(rec)
    first = build_history(records, case=CASE).series[0].points
    assert "".join(p.commit[0] for p in first) == "aaabbbcccdddeee"
    assert calls == ["cat-file", "log"]
    times["a" * 40] = "2026-01-09T00:00:00+00:00"  # amended: a is now the latest commit
    second = build_history(records, case=CASE).series[0].points
    assert "".join(p.commit[0] for p in second) == "bbbcccdddeeeaaa"
    assert calls == ["cat-file", "log"] * 2


def test_commits_of_one_second_are_ordered_by_depth(tmp_path):
    """Three commits of a real repository made within one second, run in the reverse order:
    their times tie, so `git rev-list --count` orders them (only them), not the runs'
    starts."""
    repo = tmp_path / "repo"
    env = {"GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z", "GIT_AUTHOR_DATE":
           "2026-01-01T00:00:00Z", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for i in range(3):
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "--allow-empty", "-m", str(i)],
                       check=True, env=env)
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H"], capture_output=True,
                         text=True, check=True).stdout.split()[::-1]  # oldest first
    folder = tmp_path / "runs"
    write_runs_at(log, repo, folder)
    hist = build_history(load_dir(folder).records, case=CASE)
    assert [p.commit for p in hist.series[0].points] == log


def write_runs_at(commits: list[str], repo, folder) -> None:
    """A demo run artifact at each commit of `repo` (oldest first), one a day, in `folder`."""
    for i, commit in enumerate(commits):
        rec = make.build("demo.yaml", "x", i, make.demo_time, f"2026-04-{9 - i:02d}T03:00:00Z")
        rec.provenance.git.commit, rec.provenance.git.path = commit, str(repo)
        write_artifact(rec, folder / f"{i}.json")

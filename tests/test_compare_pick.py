"""The everyday loop without file names: `mibench compare` on the newest two comparable runs
of the artifacts folder, `compare REV REV` on the runs of two commits (a small git
repository with demo run artifacts at its commits), and `ab`/`bisect` refusing two
revisions of one commit before anything is built."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.records import write_artifact
from mibench.harness.testing import error_line

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def git(repo: Path, *args: str, when: str = "2026-01-01T00:00:00Z") -> str:
    env = {"GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when, "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, env=env,
                          capture_output=True, text=True).stdout.strip()


def run_at(folder: Path, name: str, repo: Path, commit: str, started: str,
           config: str = "demo.yaml") -> Path:
    """A fake-engine run artifact of `config` that measured `commit` of `repo`."""
    rec = make.build(config, "x", len(name), make.demo_time if config == "demo.yaml"
                     else make.model_time, started)
    rec.provenance.git.commit, rec.provenance.git.path = commit, str(repo)
    write_artifact(rec, folder / name)
    return folder / name


@pytest.fixture
def world(tmp_path, monkeypatch):
    """Commits c0..c3 (a day apart) on main, tag v1 at c1; runs: c0, c1 (started after
    c2's), c2 twice, and a run of another config at c2 (newest, comparable with none). The
    current folder is the repository, whose `artifacts/` holds the runs."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(4):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{i}",
            when=f"2026-01-0{i + 1}T00:00:00Z")
        shas.append(git(repo, "rev-parse", "HEAD"))
    git(repo, "tag", "v1", shas[1])
    folder = repo / "artifacts"
    folder.mkdir()
    runs = {"c0": run_at(folder, "a.json", repo, shas[0], "2026-04-01T03:00:00Z"),
            "c1": run_at(folder, "b.json", repo, shas[1], "2026-04-09T03:00:00Z"),
            "c2-old": run_at(folder, "cc.json", repo, shas[2], "2026-04-03T03:00:00Z"),
            "c2": run_at(folder, "dddd.json", repo, shas[2], "2026-04-04T03:00:00Z"),
            "models": run_at(folder, "eeeee.json", repo, shas[2], "2026-04-10T03:00:00Z",
                             "models.yaml")}
    monkeypatch.chdir(repo)
    return repo, shas, {k: str(p.relative_to(repo)) for k, p in runs.items()}


def said(result) -> dict[str, str]:
    """The `base:` and `new:` lines compare wrote on stderr, by side."""
    out = {}
    for line in result.stderr.splitlines():
        side, _, rest = line.strip().partition(": ")
        if side in ("base", "new"):
            out[side] = rest.strip()
    return out


def test_no_paths_compares_the_newest_two_comparable_runs(world):
    """The newest comparable pair: c2's two runs (the models run, newer still but comparable
    with none, is passed over and named)."""
    repo, shas, runs = world
    result = cli("compare")
    assert result.exit_code in (0, 1), result.output
    chosen = said(result)
    assert chosen["new"].startswith(runs["c2"]) and chosen["base"].startswith(runs["c2-old"])
    assert f"commit {shas[2][:8]}" in chosen["new"] and "started 2026-04-04" in chosen["new"]
    assert "comparing the newest two comparable runs in artifacts" in result.stderr
    assert runs["models"] in result.stderr  # passed over, and said so
    assert result.stdout.startswith("#") and "against" in result.stdout  # the verdict


def test_no_paths_orders_by_commit_not_by_start(world):
    """c1's run started after c2's; c1 is the older commit, so its run is the base."""
    repo, shas, runs = world
    for key in ("c0", "c2-old", "models"):
        Path(runs[key]).unlink()
    chosen = said(cli("compare"))
    assert chosen["base"].startswith(runs["c1"]) and chosen["new"].startswith(runs["c2"])


@pytest.mark.parametrize("keep, found", [
    ([], "no *.json artifacts"),
    (["c0"], "holds one run, artifacts/a.json (commit"),
    (["c0", "models"], "holds 2 runs (config model-matrix-demo, v6e-demo), but no two"),
])
def test_fewer_than_two_comparable_runs_is_one_line(world, keep, found):
    repo, shas, runs = world
    for key, path in runs.items():
        if key not in keep:
            Path(path).unlink()
    result = cli("compare")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith("error: artifacts: ") and found in line, line


def test_dir_points_elsewhere_and_a_missing_folder_is_one_line(world, tmp_path):
    repo, shas, runs = world
    result = cli("compare", "--dir", str(tmp_path / "nowhere"))
    assert result.exit_code == 2 and "no such folder" in error_line(result)
    (repo / "artifacts").rename(tmp_path / "elsewhere")
    result = cli("compare", "--dir", str(tmp_path / "elsewhere"))
    assert result.exit_code in (0, 1) and str(tmp_path / "elsewhere") in result.stderr


def test_revisions_find_the_runs_of_their_commits(world):
    repo, shas, runs = world
    result = cli("compare", "v1", "main~1")
    assert result.exit_code in (0, 1), result.output
    chosen = said(result)
    assert chosen["base"].startswith(runs["c1"]) and f"v1 is commit {shas[1][:8]}" in \
        chosen["base"]
    # c2's newest run is of another config, not comparable with c1's: its newest that is
    assert chosen["new"].startswith(runs["c2"])
    assert chosen["new"].endswith("the newest of its 3 runs that is comparable with the "
                                  "other side")
    assert f"against {shas[1][:8]}" in result.stdout


def test_a_path_and_a_revision_mix(world):
    repo, shas, runs = world
    result = cli("compare", runs["c0"], "HEAD~1")
    assert result.exit_code in (0, 1), result.output
    chosen = said(result)
    assert chosen["base"].startswith(runs["c0"]) and chosen["new"].startswith(runs["c2"])


def test_a_revision_without_a_run_names_the_commits_that_have_one(world):
    repo, shas, runs = world
    result = cli("compare", "main~1", "HEAD")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith(f"error: HEAD: is commit {shas[3][:8]}, which has no run in "
                           "artifacts")
    near = line.split("nearest first: ", 1)[1]
    assert near.startswith(f"{shas[2][:8]} (3 runs), {shas[1][:8]} (1 run)")


def test_neither_file_nor_revision_suggests_names(world):
    repo, shas, runs = world
    result = cli("compare", "artifacts/dddx.json", "HEAD~1")
    assert result.exit_code == 2
    assert "did you mean 'artifacts/dddd.json'" in error_line(result)
    result = cli("compare", "mian", "HEAD~1")
    assert "no such artifact, nor a git revision" in error_line(result)
    assert "did you mean 'main'" in error_line(result)


def test_two_paths_work_as_before_anywhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no repository, no artifacts folder
    result = cli("compare", str(DATA / "base.json"), str(DATA / "new.json"))
    assert result.exit_code in (0, 1) and result.stderr == ""
    result = cli("compare", str(DATA / "base.json"))
    assert result.exit_code == 2 and "give BASE and NEW, or neither" in error_line(result)


@pytest.mark.parametrize("command", ["ab", "bisect"])
def test_two_revisions_of_one_commit_are_refused_before_anything_is_built(world, command,
                                                                          monkeypatch):
    repo, shas, runs = world
    cache = repo.parent / "cache"
    monkeypatch.setenv("MIBENCH_CACHE", str(cache))
    config = str(DATA / "demo.yaml")
    extra = ["--case", "*"] if command == "bisect" else []
    result = cli(command, "main", "HEAD", config, *extra)
    assert result.exit_code == 2
    line = error_line(result)
    assert line == (f"error: main and HEAD: both are commit {shas[3][:7]}, so nothing would "
                    f"be compared; give an older first revision, e.g. `mibench {command} "
                    "main~1 HEAD ...`")
    assert not cache.exists()  # no worktree
    result = cli(command, "mian", "HEAD", config, *extra)
    assert result.exit_code == 2 and "did you mean 'main'" in error_line(result)

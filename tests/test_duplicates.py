"""One run is one point (issue 41): a second artifact of a run (a copied file, the same run
id written again) counts once in history, the noise floor and export, and one line names
it and what it repeats. Each test has a control: the same copy under a run id of its own is
a run of its own, and counts (so the test can fail)."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.cli import app
from mibench.harness.judge.history import build_history, load_dir
from mibench.harness.judge.noise import aa_noise
from mibench.harness.records import read_artifact, write_artifact

DATA = Path(__file__).parent / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
CASE = "jax/packed/mask=segment/tp=1"


def runs(folder: Path, commits: str) -> list[Path]:
    """One artifact per letter of `commits` (a letter: a commit), each named after its run
    id, the CASE's time 1% apart from run to run."""
    folder.mkdir(exist_ok=True)
    paths = []
    for i, commit in enumerate(commits):
        rec = make.build("demo.yaml", commit * 8, i, make.demo_time,
                         f"2026-03-{i + 1:02d}T03:00:00Z")
        rec = make.scaled(rec, CASE, 1 + 0.01 * i)
        paths.append(folder / f"{rec.run_id}.json")
        write_artifact(rec, paths[-1])
    return paths


def as_run_of_its_own(path: Path) -> None:
    """The control: the copy made a run of its own (the same times, another run id)."""
    rec = read_artifact(path)
    rec.run_id += "-rerun"
    write_artifact(rec, path)


def points(folder: Path) -> int:
    (series,) = build_history(load_dir(folder).records, CASE).series
    return len(series.points)


def test_a_copied_run_is_one_point_of_history_and_said(tmp_path):
    paths = runs(tmp_path, "abcd")
    copy = tmp_path / "backup" / "copy.json"
    copy.parent.mkdir()
    shutil.copy(paths[1], copy)
    found = load_dir(tmp_path)
    assert len(found.records) == 4 and points(tmp_path) == 4
    assert found.skipped == [f"skipped {copy}: the same bytes as {paths[1]} (one run is one "
                             "point)"]
    out = CliRunner().invoke(app, ["history", str(tmp_path), "--format", "json"])
    assert out.exit_code == 0, out.output
    assert out.stderr.splitlines() == found.skipped
    data = json.loads(out.stdout)
    assert data["skipped"] == found.skipped and data["artifacts"] == 4
    as_run_of_its_own(copy)
    assert points(tmp_path) == 5  # control: a run of its own is a point of its own


def test_the_same_run_id_in_other_bytes_counts_once_the_file_named_after_it_kept(tmp_path):
    paths = runs(tmp_path, "abc")
    rec = read_artifact(paths[2])
    make.set_times(next(c for c in rec.cases if c.case_id == CASE), [9.0] * 5)
    write_artifact(rec, tmp_path / "0-edited.json")  # sorts first; the run's own file wins
    found = load_dir(tmp_path)
    assert found.skipped == [f"skipped {tmp_path / '0-edited.json'}: run {rec.run_id} again, "
                             f"already read from {paths[2]} (one run is one point)"]
    (series,) = build_history(found.records, CASE).series
    assert len(series.points) == 3 and series.points[-1].items_per_s > 100  # not the 9 s


def test_records_given_twice_are_one_point_and_said():
    """`build_history` on records (as the nightly passes them): the second is left out."""
    rec = make.build("demo.yaml", "a" * 8, 0, make.demo_time, "2026-03-01T03:00:00Z")
    other = make.build("demo.yaml", "b" * 8, 1, make.demo_time, "2026-03-02T03:00:00Z")
    hist = build_history([rec, other, rec.model_copy(deep=True)], CASE)
    assert len(hist.series[0].points) == 2 and hist.artifacts == 2
    assert hist.skipped == [f"skipped a second artifact of run {rec.run_id} (one run is one "
                            "point)"]


def test_a_run_and_its_copy_give_no_zero_noise_floor(tmp_path):
    paths = runs(tmp_path, "ab")
    copy = tmp_path / "copy.json"
    shutil.copy(paths[0], copy)
    records = [read_artifact(p) for p in [*paths, copy]]
    with pytest.raises(MibenchError, match="holds no A/A runs.*1 second artifact"):
        aa_noise(records, "here")
    hist = build_history(load_dir(tmp_path).records, CASE, where="here")
    assert hist.noise.startswith("default for tpu devices (no A/A runs in here")
    out = CliRunner().invoke(app, ["compare", str(paths[0]), str(paths[1]), "--noise-from",
                                   str(tmp_path)])
    assert out.exit_code == 2 and "holds no A/A runs" in out.output
    assert f"skipped {copy}: the same bytes as {paths[0]}" in out.stderr
    as_run_of_its_own(copy)  # control: the same times as a run of its own are a 0% floor
    floor = aa_noise([read_artifact(p) for p in [*paths, copy]], "here")
    assert floor.value == 0.0 and floor.source.startswith("learnt from A/A runs in here")


def rows(out) -> list[dict]:
    assert out.exit_code == 0, out.output
    return list(csv.DictReader(io.StringIO(out.stdout)))


def test_export_counts_a_copied_artifact_once_and_says_so(tmp_path):
    (path,) = runs(tmp_path, "a")
    copy = tmp_path / "copy.json"
    shutil.copy(path, copy)
    export = CliRunner().invoke
    alone = rows(export(app, ["export", str(path), "--format", "csv"]))
    both = export(app, ["export", str(copy), str(path), "--format", "csv"])
    assert rows(both) == alone  # the file named after its run is the one read
    assert both.stderr.splitlines() == [f"skipped {copy}: the same bytes as {path} (one run "
                                        "is one point)"]
    as_run_of_its_own(copy)
    assert len(rows(export(app, ["export", str(copy), str(path)]))) == 2 * len(alone)

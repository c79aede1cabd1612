"""`mibench history` is like with like (docs/verdicts.md): a series is one measurement,
labelled by what differs; a case missing from a run is a gap; artifacts of other kinds
are skipped with one line each; a 2x step with one point a side is a suspected step
judged by the between-run test, a busy point is shown and never evidence."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.judge.history import build_history, load_dir
from mibench.harness.records import CaseLoad, read_artifact, write_artifact

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "reports"
_spec = importlib.util.spec_from_file_location("make_artifacts", DATA / "make_artifacts.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)
CASE = "jax/packed/mask=segment/tp=1"


def cli(*args):
    return CliRunner().invoke(app, ["history", *map(str, args)])


def timeline(folder: Path, factors: list[float | None], busy: tuple[int, ...] = ()):
    """One artifact per fake commit; CASE takes factors[i] x its time (None: missing from
    that run); the runs in `busy` were measured beside other work (70%)."""
    for i, factor in enumerate(factors):
        rec = make.build("demo.yaml", f"c{i:02d}", i, make.demo_time,
                         f"2026-03-{i + 1:02d}T03:00:00Z")
        if factor is None:
            rec.cases = [c for c in rec.cases if c.case_id != CASE]
        else:
            rec = make.scaled(rec, CASE, factor)
        for c in rec.cases:
            c.load = CaseLoad(window_s=2.0, cpus=2, other_share=0.7 if i in busy else 0.02,
                              other_cpu_s=2.8 if i in busy else 0.08, own_cpu_s=1.0,
                              source="/proc")
        write_artifact(rec, folder / f"{i:02d}.json")


def series_of(folder: Path, case: str = CASE):
    return build_history(load_dir(folder).records, case).series


def test_one_case_id_at_two_workloads_is_two_labelled_series(tmp_path):
    base = read_artifact(DATA / "new.json")
    for i, query in enumerate((2000, 1000, 2000, 1000)):
        rec = base.model_copy(deep=True)
        rec.run_id, rec.started_at = f"r{i}", f"2026-04-0{i + 1}T00:00:00Z"
        rec.provenance.git.commit = f"{i:07d}" + "0" * 33
        for c in rec.cases:
            c.workload = c.workload.model_copy(update={"query_tokens": query})
        write_artifact(rec, tmp_path / f"{i}.json")
    series = series_of(tmp_path)
    assert [s.label for s in series] == ["workload.query_tokens=2000",
                                        "workload.query_tokens=1000"]
    assert [len(s.points) for s in series] == [2, 2]  # each its own runs, never spliced
    md = cli(tmp_path, "--case", CASE).stdout
    assert f"{CASE} [workload.query_tokens=1000]" in md


def test_a_missing_case_is_a_gap_not_a_zero_and_other_kinds_are_skipped(tmp_path):
    timeline(tmp_path, [1.0, None, 1.0])
    (tmp_path / "ab.json").write_text(json.dumps({"schema": "mibench.ab/3"}))
    (tmp_path / "compile.json").write_text(json.dumps({"schema": "mibench.compile/1"}))
    (s,) = series_of(tmp_path)
    assert [p.status for p in s.points] == ["ok", "missing", "ok"]
    assert s.points[1].items_per_s is None and s.steps == []
    out = cli(tmp_path, "--case", CASE, "--format", "json")
    assert out.exit_code == 0, out.output
    skipped = [x for x in out.stderr.splitlines() if x.startswith("skipped ")]
    assert len(skipped) == 2 and "ab.json: a mibench.ab/3 file, not a run artifact" in \
        skipped[0]
    assert json.loads(out.stdout)["skipped"] == skipped
    only_others = tmp_path / "others"
    only_others.mkdir()
    (only_others / "ab.json").write_text(json.dumps({"schema": "mibench.ab/3"}))
    out = cli(only_others)
    assert out.exit_code == 2 and "holds no run artifacts (1 other files skipped: " in \
        out.output and "ab.json: a mibench.ab/3 file, not a run artifact" in out.output


def test_the_repositorys_artifacts_read_and_what_is_no_mibench_artifact_is_skipped():
    """`mibench history artifacts`: the GPU job's `*.summary.json` beside its runs claims
    no mibench schema: skipped with one line, like the `ab` and `compile` artifacts."""
    out = cli(ROOT / "artifacts")
    assert out.exit_code == 0, out.output
    summary = "artifacts/gpu/gpu-20261126T060400Z-9bc0.summary.json"
    (line,) = [x for x in out.stderr.splitlines() if summary in x]
    assert line.endswith(": not a mibench artifact (no mibench schema)")


@pytest.mark.parametrize("text", ['{"machine": {"jax": "0.11.2"}}', "[1, 2]", "not json {",
                                  '{"schema": "other.tool/1"}'])
def test_a_file_that_is_no_mibench_artifact_is_one_line_and_skipped(tmp_path, text):
    timeline(tmp_path, [1.0, 1.0])
    (tmp_path / "notes.json").write_text(text)
    out = cli(tmp_path, "--case", CASE)
    assert out.exit_code == 0, out.output
    why = "not JSON" if text == "not json {" else "no mibench schema"
    assert out.stderr.splitlines() == [f"skipped {tmp_path / 'notes.json'}: not a mibench "
                                       f"artifact ({why})"]


@pytest.mark.parametrize("damage", ["fields", "truncated", "ab"])
def test_a_damaged_mibench_artifact_is_still_an_error_naming_it(tmp_path, damage):
    """A file that claims a mibench schema but cannot be read: exit 2, one line naming it
    (a run schema with a field gone; a cut-off file; a cut-off file of another kind)."""
    timeline(tmp_path, [1.0, 1.0])
    good = (tmp_path / "00.json").read_text()
    bad = tmp_path / "zz.json"
    bad.write_text({"fields": good.replace('"cases"', '"kases"'), "truncated": good[:400],
                    "ab": '{"schema": "mibench.ab/3", "cases": ['}[damage])
    out = cli(tmp_path, "--case", CASE)
    assert out.exit_code == 2
    (line,) = out.output.strip().splitlines()
    assert line.startswith("error: ") and str(bad) in line


def test_the_shipped_3x_jump_is_a_suspected_step_with_one_point_a_side():
    """artifacts/cpu: 1.46 -> 4.58 items/s between two commits (was `Change points:
    none`); judged at the CPU floor: beyond the noise, an improvement (time -68%)."""
    hist = build_history(load_dir(ROOT / "artifacts" / "cpu").records,
                         "jax/single/tp=1/items=25")
    (s,) = hist.series
    (step,) = s.steps
    assert step.kind == "suspected step" and step.verdict == "improvement"
    assert step.latency_change == pytest.approx(1.46 / 4.58 - 1, abs=0.01)
    assert step.latency_high < 0 and "default for cpu devices" in step.reason


def test_a_busy_point_is_never_evidence(tmp_path):
    """2.2x slower from the 5th run on, with a busy run and a missing one before it: the
    step is judged between the quiet neighbours across them (a regression), and the
    busy run's own 2x is named, never a verdict."""
    timeline(tmp_path, [1.0, 1.0, None, 1.0, 2.2, 2.2], busy=(3,))
    (s,) = series_of(tmp_path)
    (step,) = s.steps
    assert (step.index, step.kind, step.verdict) == (4, "suspected step", "regression")
    assert step.latency_change == pytest.approx(1.2, abs=0.05)
    alone = tmp_path / "busy"
    alone.mkdir()
    timeline(alone, [1.0, 2.2], busy=(1,))
    (s,) = series_of(alone)
    (step,) = s.steps
    assert step.verdict == "inconclusive"
    assert step.reason.startswith("after side: other processes held 70% of the CPU")


def test_change_points_are_found_among_the_quiet_points_only(tmp_path):
    """Six busy runs at the end, 2x slower because of the load: no change point, and
    their step is inconclusive (the A/A matrix's case); quiet, the same is a change point."""
    timeline(tmp_path, [1.0] * 6 + [2.1] * 6, busy=tuple(range(6, 12)))
    (s,) = series_of(tmp_path)
    assert s.change_points == []
    assert [(st.index, st.verdict) for st in s.steps] == [(6, "inconclusive")]
    control = tmp_path / "quiet"
    control.mkdir()
    timeline(control, [1.0] * 6 + [2.1] * 6)
    (s,) = series_of(control)
    assert [(st.index, st.kind, st.verdict) for st in s.steps] == [
        (6, "change point", "regression")]


def test_the_noise_floor_is_learnt_without_the_pair_and_says_so(tmp_path):
    """Four runs of one commit (A/A) and a fifth at another: the floor comes from the
    A/A runs, and the history says what it used."""
    for i, factor in enumerate((1.0, 1.02, 0.98, 1.01, 2.5)):
        rec = make.build("demo.yaml", "aaaa" if i < 4 else "bbbb", i, make.demo_time,
                         f"2026-03-{i + 1:02d}T03:00:00Z")
        rec = make.scaled(rec, CASE, factor)
        write_artifact(rec, tmp_path / f"{i}.json")
    hist = build_history(load_dir(tmp_path).records, CASE, where=str(tmp_path))
    assert hist.noise.startswith(f"learnt from A/A runs in {tmp_path}")
    (s,) = hist.series
    (step,) = s.steps
    assert step.verdict == "regression" and "learnt from A/A runs" in step.reason
    assert "left out: the 2 artifact(s) judged" in step.reason  # 4th and 5th: the step's


def test_a_floor_without_a_pair_is_the_floor_learnt_without_those_two_runs(tmp_path):
    """The A/A groups are read once per build (noise.AAGroups): leaving out any pair gives,
    to the last bit, the floor learnt afresh from the other records (runs of three
    commits interleaved, so that leaving out a group's first run moves it in the sum; one
    run on a busy machine)."""
    import itertools

    from mibench.harness.judge.noise import AAGroups, aa_noise

    for i in range(9):
        rec = make.build("demo.yaml", "abc"[i % 3] * 4, i, make.demo_time,
                         f"2026-03-{i + 1:02d}T03:00:00Z")
        rec = make.scaled(rec, CASE, 1 + 0.013 * ((i * 7) % 5))
        if i == 4:
            for c in rec.cases:
                c.load = CaseLoad(window_s=2.0, cpus=2, other_share=0.7, other_cpu_s=2.8,
                                  own_cpu_s=1.0, source="/proc")
        write_artifact(rec, tmp_path / f"{i}.json")
    records = load_dir(tmp_path).records
    groups = AAGroups(records)
    for pair in map(frozenset, itertools.combinations([r.run_id for r in records], 2)):
        fresh = aa_noise([r for r in records if r.run_id not in pair], "here")
        floor = groups.floor("here", pair)
        assert floor.value == fresh.value  # exactly
        assert floor.source.split("; left out")[0] == fresh.source.split("; left out")[0]
        assert "left out: the 2 artifact(s) judged" in floor.source


def test_a_window_keeps_each_series_last_points_and_their_steps(tmp_path):
    """What a night shows of a long history (harness/judge/history.py `window`): the last
    points of each series, a step among them re-indexed, one before them gone."""
    from mibench.harness.judge.history import window

    timeline(tmp_path, [1.0] * 8 + [2.0] * 8 + [1.0] * 8)  # up at 8, down at 16
    hist = build_history(load_dir(tmp_path).records, CASE)
    (full,) = hist.series
    assert sorted(s.index for s in full.steps) == [8, 16]
    (cut,) = window(hist, 10).series
    assert [p.run_id for p in cut.points] == [p.run_id for p in full.points[-10:]]
    assert [(s.index, s.verdict) for s in cut.steps] == [(2, "improvement")]  # 16 - 14
    assert window(hist, 100).series[0].points == full.points  # short: as it was

"""Artifacts are standard JSON: a record never takes a NaN or an infinity, a derived metric
that comes out undefined is null, `to_json` refuses what is left naming the field, and
every reader refuses a file with a bare `NaN` or `Infinity` (which Python's json accepts)
as one line naming the file and the field, exit 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.records import (
    CaseRecord,
    Metrics,
    ParityCheck,
    read_artifact,
    write_artifact,
)
from mibench.harness.records.ab import Timing
from mibench.harness.testing import error_line

REAL = Path(__file__).parent / "data" / "reports" / "real-smoke.json"
CONFIG = Path(__file__).parents[1] / "configs" / "cpu-smoke.yaml"


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def edited(tmp_path: Path, edit, name: str = "edited.json") -> Path:
    data = json.loads(REAL.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))  # json.dumps writes NaN and Infinity bare
    return path


def nan_score(data):
    data["cases"][0]["scores"] = [[[0.25, 0.5], [0.125, float("nan")]]]


def test_compare_of_an_artifact_with_a_nan_score_against_itself_is_exit_2_naming_the_field(
        tmp_path):
    """It was a regression (exit 1: the NaN made the scores 'move'); the file is invalid."""
    bad = edited(tmp_path, nan_score)
    assert "NaN" in bad.read_text()
    out = invoke("compare", bad, bad)
    assert out.exit_code == 2, out.output
    line = error_line(out)
    assert str(bad) in line and "cases.0.scores.0.1.1 is NaN" in line, line
    assert "not standard JSON" in line


@pytest.mark.parametrize("value,shown", [(float("inf"), "Infinity"),
                                         (float("-inf"), "-Infinity")])
def test_every_reader_refuses_a_bare_infinity_naming_the_field(tmp_path, value, shown):
    folder = tmp_path / "artifacts"
    folder.mkdir()
    bad = edited(folder, lambda d: d["cases"][1]["metrics"].update(mfu=value))
    for args in (("report", bad), ("compare", REAL, bad), ("history", folder),
                 ("run", CONFIG, "--resume", bad)):
        out = invoke(*args)
        assert out.exit_code == 2, (args, out.output)
        line = error_line(out)
        assert str(bad) in line and f"cases.1.metrics.mfu is {shown}" in line, (args, line)


def test_a_nan_in_a_free_form_field_is_refused_too(tmp_path):
    """Not only typed floats: the resolved config and the provenance are plain dicts."""
    bad = edited(tmp_path, lambda d: d["provenance"]["host"].update(load=float("nan")))
    with pytest.raises(ValueError, match=r"provenance\.host\.load is NaN"):
        read_artifact(bad)


def test_record_fields_refuse_nan_and_infinity():
    case = json.loads(REAL.read_text())["cases"][0]
    for field, value in (("compile_s", float("nan")), ("timed_s", [0.1, float("inf")]),
                         ("scores", [[[0.5, float("nan")]]])):
        with pytest.raises(ValidationError, match=field):
            CaseRecord.model_validate({**case, field: value})


def test_an_undefined_derived_metric_is_null():
    assert Metrics(mfu=float("nan"), tokens_per_s=float("inf")).mfu is None
    check = ParityCheck(check="speedup", case_id="a", against="b", tolerance=3.0,
                        status="failed", speedup=float("inf"), max_rel_diff=float("nan"))
    assert check.speedup is None and check.max_rel_diff is None
    t = Timing(method="m", rounds=3, change=math.nan, low=None, high=None, p_value=math.nan,
               alpha=0.01, min_effect=0.05, verdict="untested")
    assert t.change is None and t.p_value is None


def test_to_json_refuses_a_nan_that_slipped_into_a_record_naming_the_field(tmp_path):
    record = read_artifact(REAL)
    record.cases[2].warmup_s.append(float("nan"))  # a list mutated in place: not validated
    with pytest.raises(ValueError, match=r"cases\.2\.warmup_s\.\d+ is NaN"):
        record.to_json()
    path = tmp_path / "a.json"
    with pytest.raises(ValueError):
        write_artifact(record, path)
    assert not path.exists() and not list(tmp_path.iterdir())  # nothing half-written


def test_written_artifacts_are_standard_json(tmp_path):
    def refuse(name):
        raise AssertionError(f"bare {name} in the artifact")

    path = tmp_path / "a.json"
    write_artifact(read_artifact(REAL), path)
    json.loads(path.read_text(), parse_constant=refuse)

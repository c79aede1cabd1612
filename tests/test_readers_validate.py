"""Every reader of run artifacts applies the one validation (harness/judge/comparable.py
`defect`, through harness/commands/common.py `load`): `report`, `history`, `compare`,
`compare --noise-from` and `run --resume` refuse a duplicated case, tripled or empty
`timed_s`, summaries that disagree with the samples, and an ok case with no timed runs or
no items, as one line naming the file and the case, exit 2. One or two timed runs are a
real run: `compare` calls them untested (exit 1), as before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.testing import error_line

DATA = Path(__file__).parent / "data" / "reports"
REAL = DATA / "real-smoke.json"  # 7 ok cases, 3 timed runs each
CASE1 = "jax/packed/mask=dense/tp=1"


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def tripled(d):
    d["cases"][1]["timed_s"] *= 3


def emptied(d):  # and the summaries with it: only the empty timed runs are left to see
    c = d["cases"][1]
    c["timed_s"] = []
    for name in ("throughput_items_per_s", "latency_per_item_ms", "total_s"):
        c["metrics"][name] = None


def no_items(d):
    d["cases"][1]["workload"]["num_items"] = 0


def duplicated(d):
    d["cases"].append(d["cases"][0])


DEFECTS = {
    "tripled": (tripled, f"case {CASE1}: metrics.total_s.n is 3 but timed_s gives 9"),
    "empty": (emptied, f"case {CASE1}: is ok but has no timed runs (timed_s is empty)"),
    "no-items": (no_items, f"case {CASE1}: is ok but scored no items (workload.num_items "
                          "is 0)"),
    "duplicate": (duplicated, "case jax/single/tp=1 appears twice"),
}


def broken(folder: Path, kind: str) -> Path:
    data = json.loads(REAL.read_text())
    DEFECTS[kind][0](data)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{kind}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("kind", list(DEFECTS))
def test_every_reader_refuses_what_compare_refuses(tmp_path, kind):
    """Before: `report` and `history` rendered these, `--noise-from` learnt from them, and
    `compare` judged an ok case with no timed runs or items (exit 1)."""
    bad = broken(tmp_path / "dir", kind)
    shutil.copy(REAL, tmp_path / "dir" / "good.json")
    needle = DEFECTS[kind][1]
    config = tmp_path / "c.yaml"
    config.write_text((Path(__file__).parents[1] / "configs" / "cpu-smoke.yaml").read_text())
    for args in (("report", bad), ("report", REAL, bad), ("history", bad.parent),
                 ("compare", REAL, bad), ("compare", bad, REAL),
                 ("compare", REAL, REAL, "--noise-from", bad.parent),
                 ("run", config, "--resume", bad)):
        out = invoke(*args)
        assert out.exit_code == 2, (args, out.output)
        line = error_line(out)
        assert str(bad) in line and needle in line, (args, line)
        assert "invalid artifact" in line or "cannot be compared" in line, (args, line)


@pytest.mark.parametrize("runs", [1, 2])
def test_one_or_two_timed_runs_stay_untested(tmp_path, runs):
    data = json.loads(REAL.read_text())
    from mibench.harness.records import RunRecord
    from mibench.harness.records.summaries import summarize
    from mibench.harness.stats.describe import per_unit_ms, rates

    for c in data["cases"]:
        c["timed_s"] = c["timed_s"][:runs]
        n = c["workload"]["num_items"]
        for name, values in (("total_s", c["timed_s"]),
                             ("throughput_items_per_s", rates(c["timed_s"], n)),
                             ("latency_per_item_ms", per_unit_ms(c["timed_s"], n))):
            c["metrics"][name] = summarize(values).model_dump()
    path = tmp_path / "short.json"
    path.write_text(RunRecord.model_validate({**data, "schema": "mibench.run/4"}).to_json())
    out = invoke("compare", REAL, path)
    assert out.exit_code == 1 and "UNTESTED" in out.output, out.output
    assert invoke("report", path).exit_code == 0


def test_an_artifact_without_cases_is_still_reported_but_not_compared(tmp_path):
    """A run stopped before its first case finished has no cases: a report shows it, a
    comparison has nothing to judge."""
    data = json.loads(REAL.read_text())
    data["cases"] = []
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(data))
    assert invoke("report", path).exit_code == 0
    out = invoke("compare", REAL, path)
    assert out.exit_code == 2 and "cannot be compared: has no cases" in error_line(out)

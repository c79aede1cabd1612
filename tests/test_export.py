"""`mibench export`: one exporter per format behind one interface (CSV, JSON rows, Bencher
Metric Format), `--case` selection, and the pandas DataFrame of cases for notebooks."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError
from mibench.harness.cli import app
from mibench.harness.records import read_artifact
from mibench.harness.report.exporters import EXPORTERS, cases_frame
from mibench.harness.report.exporters.rows import COLUMNS

DATA = Path(__file__).parent / "data" / "reports"
BASE, NEW = DATA / "base.json", DATA / "new.json"


def cli(*args):
    return CliRunner().invoke(app, ["export", *map(str, args)])


def test_every_format_is_one_module_behind_one_interface():
    from mibench.harness.commands.export import FORMATS

    assert tuple(EXPORTERS) == FORMATS == ("csv", "json", "bmf")  # the --help's list too
    for name, module in EXPORTERS.items():
        assert module.NAME == name and module.SUFFIX.startswith(".")
        assert callable(module.export)
    with pytest.raises(MibenchError, match="unknown format 'xml'"):
        EXPORTERS.lookup("xml")


def test_csv_has_a_row_per_case_and_timed_run():
    out = cli(BASE, NEW, "--format", "csv")
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(rows[0]) == COLUMNS
    record = read_artifact(NEW)
    for case in record.cases:
        mine = [r for r in rows if r["run_id"] == record.run_id and r["case_id"] == case.case_id]
        assert len(mine) == max(1, len(case.timed_s))
        if case.status == "ok":
            assert [float(r["time_s"]) for r in mine] == case.timed_s
            n = case.workload.num_items
            assert float(mine[0]["items_per_s"]) == pytest.approx(n / case.timed_s[0])
        else:
            assert mine[0]["time_s"] == "" and mine[0]["status"] == case.status
    first = rows[0]
    assert first["commit"].startswith("1111111") and first["config"] == "v6e-demo"
    assert first["device_kind"] == "TPU v6 lite" and first["workload.num_items"] == "500"


def test_bmf_has_throughput_and_latency_with_bounds(tmp_path):
    out = cli(NEW, "--format", "bmf", "--case", "jax/packed/*", "--out", tmp_path / "b.json")
    assert out.exit_code == 0, out.output
    data = json.loads((tmp_path / "b.json").read_text())
    case = next(c for c in read_artifact(NEW).cases
                if c.case_id == "jax/packed/mask=segment/tp=1")
    (key,) = [k for k in data if k.startswith("v6e-demo/jax/packed/mask=segment/tp=1 #")]
    bench = data[key]
    rate = case.metrics.throughput_items_per_s
    assert bench["throughput"] == {"value": rate.median, "lower_value": rate.min,
                                   "upper_value": rate.max}
    assert bench["latency"]["value"] == pytest.approx(
        1e6 * case.metrics.latency_per_item_ms.median)  # nanoseconds per item
    assert all(k.startswith("v6e-demo/jax/packed/") for k in data)
    two = json.loads(cli(BASE, NEW, "--format", "bmf").stdout)
    assert any(k.endswith(" @" + read_artifact(BASE).run_id) for k in two)  # kept apart


def test_export_keys_carry_the_measurement(tmp_path):
    """Two runs of one case id at different query lengths are two series in every export, as
    in `compare` (not comparable) and `history` (two series)."""
    base = read_artifact(NEW)
    other = base.model_copy(deep=True)
    other.run_id = "other-items"
    for c in other.cases:
        c.workload = c.workload.model_copy(update={"query_tokens": 1000})
    from mibench.harness.records import write_artifact

    write_artifact(other, tmp_path / "other.json")
    bmf = json.loads(cli(NEW, tmp_path / "other.json", "--format", "bmf", "--case",
                         "jax/packed/mask=segment/tp=1").stdout)
    assert len(bmf) == 2 and not any(" @" in k for k in bmf)  # apart by measurement
    rows = json.loads(cli(NEW, tmp_path / "other.json", "--format", "json", "--case",
                          "jax/packed/mask=segment/tp=1").stdout)["rows"]
    ids = {r["run_id"]: r["measurement_id"] for r in rows}
    assert len(set(ids.values())) == 2 and all(len(v) == 12 for v in ids.values())


def test_json_rows_and_case_globs():
    data = json.loads(cli(NEW, "--format", "json", "--case", "torch/*", "--case",
                          "jax/single/*").stdout)
    assert data["schema"] == "mibench.export/2" and data["columns"] == COLUMNS
    assert {r["case_id"] for r in data["rows"]} == {"torch/single/tp=1", "torch/single/tp=4",
                                                   "jax/single/tp=1", "jax/single/tp=4"}
    bad = cli(NEW, "--case", "nope/*")
    assert bad.exit_code == 2 and "--case: 'nope/*' matches no case" in bad.output


def test_cases_frame():
    pd = pytest.importorskip("pandas")
    df = cases_frame([BASE, NEW])
    assert isinstance(df, pd.DataFrame) and list(df.columns) == COLUMNS
    medians = df[df.status == "ok"].groupby(["commit", "case_id"]).items_per_s.median()
    seg = medians[(read_artifact(NEW).provenance.git.commit, "jax/packed/mask=segment/tp=1")]
    assert seg == pytest.approx(115.93, abs=0.01)
    assert len(cases_frame(DATA / "base.json")) == len(cases_frame([read_artifact(BASE)]))


def test_cases_frame_without_pandas_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MibenchError, match=r"needs pandas: pip install 'mibench\[frame\]'"):
        cases_frame([NEW])

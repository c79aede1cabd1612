"""Pure pieces: statistics, metrics, the useful-FLOPs formula, digests, the shipped schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from mibench.harness.host.peak import vendor_peak
from mibench.harness.records import SCHEMA, SCHEMA_FILE, RunRecord, json_schema, read_artifact
from mibench.harness.records.metrics import case_metrics, score_digest, useful_flops
from mibench.harness.records.summaries import summarize
from mibench.harness.testing import TINY
from mibench.workloads import Request

GOLDEN = Path(__file__).parent / "data" / "run-cpu-smoke.json"


def test_summary():
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.median, s.mean, s.min, s.max, s.n) == (2.5, 4.0, 1.0, 10.0, 4)
    assert s.stdev == pytest.approx(4.0824829, rel=1e-6)
    assert summarize([5.0]).stdev == 0.0 and summarize([]) is None


def test_useful_flops_by_hand():
    req = [Request(query=(1,) * 3, items=((2, 2), (3,)))]
    d, layers, q, kv, ff, v = 256, 4, 256, 128, 768, 151936
    per_token = 2 * layers * (d * (q + 2 * kv) + q * d + 3 * d * ff)
    p = 3 + 1  # query + delimiter
    tokens = p + 3
    keys = p * (p + 1) / 2 + (p + 1) + (p + 2) + (p + 1)  # prefix causal; items
    expected = per_token * tokens + 4 * layers * q * keys + 2 * d * v * 2
    assert useful_flops(TINY, req, 9, 2, False) == expected
    with_softmax = expected - 2 * d * v * 2 + 2 * d * 2 * 2
    assert useful_flops(TINY, req, 9, 2, True) == with_softmax


def test_case_metrics():
    reqs = [Request(query=(1,) * 10, items=((2,) * 5,) * 4)]
    m = case_metrics([2.0, 1.0, 4.0], reqs, None, flops=8e9, peak_flops=1e10)
    assert m.throughput_items_per_s.median == 2.0 and m.throughput_items_per_s.max == 4.0
    assert m.latency_per_item_ms.median == 500.0 and m.total_s.median == 2.0
    assert m.tokens_per_s == 30 / 2.0 and m.mfu == pytest.approx(0.4)
    assert case_metrics([], reqs, None, 1.0, 1.0).mfu is None


def test_digest_rounds():
    a = score_digest([[[0.1234567891, 0.5]]])
    assert a == score_digest([[[0.1234567892, 0.5]]])
    assert a != score_digest([[[0.1234577, 0.5]]])


def test_vendor_peaks():
    assert vendor_peak("TPU v6 lite", "bfloat16") == 918e12
    assert vendor_peak("NVIDIA H100 80GB HBM3", "bfloat16") == 989e12
    assert vendor_peak("some new chip", "bfloat16") is None


def test_shipped_schemas_match_the_models():
    """Every artifact kind (run, A/B, compile, the nightly's index and summary) ships the
    JSON Schema its models generate."""
    from mibench.harness.records import schema_file, schemas

    assert set(schemas()) == {"mibench.run/4", "mibench.ab/4", "mibench.compile/2",
                              "mibench.nightly/2", "mibench.nightly-summary/2"}
    for name, schema in schemas().items():
        assert json.loads(schema_file(name).read_text()) == json.loads(json.dumps(schema)), \
            f"{name}: run `python -m mibench.harness.records` to regenerate the schemas"
    assert json_schema(RunRecord, SCHEMA)["title"] == "mibench.run/4"


def test_golden_artifact_validates_and_reads():
    data = json.loads(GOLDEN.read_text())  # a run/1 artifact: run/2 and /3 only add fields
    jsonschema.validate({**data, "schema": SCHEMA}, json.loads(SCHEMA_FILE.read_text()))
    record = read_artifact(GOLDEN)
    assert record.finished_at and all(c.status == "ok" for c in record.cases)
    assert record.parity.passed


@pytest.mark.parametrize("reader", ["run", "ab", "compile"])
def test_every_artifact_reader_refuses_bad_files_in_one_line(tmp_path, reader):
    """The run, A/B and compile readers share one reader: not JSON, another kind, a field
    of the wrong type, a folder, a missing file: each a MibenchError naming the file."""
    from mibench.engines import MibenchError
    from mibench.harness.records.ab import read_ab
    from mibench.harness.records.compile import read_compile_artifact

    read = {"run": read_artifact, "ab": read_ab, "compile": read_compile_artifact}[reader]
    name = {"run": "mibench.run/4", "ab": "mibench.ab/4", "compile": "mibench.compile/2"}
    other = "mibench.ab/4" if reader != "ab" else "mibench.run/4"
    cases = {"not JSON": "{", f"is not '{name[reader]}'": json.dumps({"schema": other}),
             f"invalid {name[reader]} artifact at": json.dumps({"schema": name[reader],
                                                                 "run_id": 3})}
    for needle, text in cases.items():
        path = tmp_path / "a.json"
        path.write_text(text)
        with pytest.raises(MibenchError, match=needle) as e:
            read(path)
        assert str(path) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(MibenchError, match="is a folder"):
        read(tmp_path)
    with pytest.raises(MibenchError, match="no such artifact"):
        read(tmp_path / "missing.json")


def test_an_older_version_of_each_kind_still_reads():
    """run/1 (a real cpu-smoke artifact of an earlier mibench) reads as run/4, whose
    fields it lacks being optional."""
    old = GOLDEN
    assert json.loads(old.read_text())["schema"] == "mibench.run/1"
    record = read_artifact(old)
    assert record.schema_ == SCHEMA == "mibench.run/4" and record.cases
    assert record.provenance.invocation is None and record.cases[0].server is None
    assert record.cases[0].load is None  # not recorded before run/3


def test_an_ab_1_artifact_reads_as_ab_4(tmp_path):
    from mibench.harness.records import read_ab

    root = Path(__file__).resolve().parents[1]
    ab = json.loads(next((root / "artifacts/sglang-jax-cpu/ab").glob("*.json")).read_text())
    ab["schema"] = "mibench.ab/1"
    for case in ab["cases"]:
        case.pop("servers", None)
    path = tmp_path / "ab1.json"
    path.write_text(json.dumps(ab))
    assert read_ab(path).schema_ == "mibench.ab/4"

"""The cases' typed sub-records (harness/records/case.py: model, topology, workload, runs)
leave the JSON as it was: every shipped artifact (artifacts/, tests/data/, reports/, of
every kind and version) reads and dumps back to the very same sub-record dicts, the same
keys in the same order, nulls kept and absent keys absent; and the whole case keeps every
value it had (what a later mibench adds to an older case is the other records' defaults)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mibench.harness.records import (
    AB_SCHEMA,
    COMPILE_SCHEMA,
    SCHEMA,
    CaseRecord,
    ModelRef,
    RunsRecord,
    TopologyRecord,
    WorkloadRecord,
    read_ab,
    read_artifact,
    read_compile_artifact,
)
from mibench.harness.records.ab import AB_OLDER
from mibench.harness.records.run import OLDER
from mibench.harness.verdicts import legacy_verdict

ROOT = Path(__file__).parents[1]
READERS = {SCHEMA: read_artifact, **dict.fromkeys(OLDER, read_artifact),
           COMPILE_SCHEMA: read_compile_artifact, AB_SCHEMA: read_ab,
           **dict.fromkeys(AB_OLDER, read_ab)}
SUB_RECORDS = ("model", "topology", "workload", "runs")


def shipped() -> list[Path]:
    """Every artifact file in the repository, whatever its kind."""
    found = []
    for folder in ("artifacts", "tests/data", "reports"):
        for path in sorted((ROOT / folder).rglob("*.json")):
            try:
                data = json.loads(path.read_text())
            except (ValueError, UnicodeDecodeError):
                continue
            if isinstance(data, dict) and data.get("schema") in READERS and data.get("cases"):
                found.append(path)
    return found


ARTIFACTS = shipped()


def within(new, old):
    """`new` cut down to the keys `old` has, at every depth (what a reader kept of `old`)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: within(new[k], old[k]) if k in new else new.get(k) for k in old}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [within(a, b) for a, b in zip(new, old, strict=True)]
    return new


def test_the_shipped_artifacts_cover_every_kind_and_the_sparse_keys():
    """The round trip below sees run/1, run/2, run/3, compile and A/B artifacts (ab/2 and
    ab/3), and cases with and without the keys that came later (so the test can fail)."""
    kinds = {json.loads(p.read_text())["schema"] for p in ARTIFACTS}
    assert kinds >= {SCHEMA, *OLDER, COMPILE_SCHEMA, AB_SCHEMA, "mibench.ab/2"}
    cases = [c for p in ARTIFACTS for c in json.loads(p.read_text())["cases"]]
    runs = [c["runs"] for c in cases if "runs" in c]
    assert any("max_rss" in r for r in runs) and any("max_rss" not in r for r in runs)
    assert any(r.get("timeout_s") is None and "timeout_s" in r for r in runs)
    topologies = [c["topology"] for c in cases if "topology" in c]
    assert any("devices" in t for t in topologies) and any("base_url" in t for t in topologies)
    assert any(list(t) == ["tp"] for t in topologies)


def translated(case: dict) -> dict:
    """An ab/1 or ab/2 case with its `no change` words as ab/3 reads them (the one change
    a reader makes to an older case's values: harness/records/ab.py)."""
    timing = case.get("timing")
    if not timing or timing.get("verdict") != "no change":
        return case
    word = legacy_verdict("no change", timing["low"], timing["high"], timing["min_effect"])
    return {**case, "timing": {**timing, "verdict": word},
            "verdict": word if case.get("verdict") == "no change" else case.get("verdict")}


@pytest.mark.parametrize("path", ARTIFACTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_artifact_reads_and_dumps_back_to_the_same_cases(path):
    record = READERS[json.loads(path.read_text())["schema"]](path)
    original = [translated(c) for c in json.loads(path.read_text())["cases"]]
    dumped = json.loads(record.to_json())["cases"]
    assert len(dumped) == len(original)
    for i, (new, old) in enumerate(zip(dumped, original, strict=True)):
        for field in SUB_RECORDS:
            if field in old:
                assert new[field] == old[field], f"cases.{i}.{field}"
                assert list(new[field]) == list(old[field]), f"cases.{i}.{field}: key order"
        assert within(new, old) == old, f"cases.{i}"


def test_sub_records_are_typed_and_keep_exactly_the_keys_given():
    case = CaseRecord(case_id="c", engine="jax", mode="single", params={},
                      model=ModelRef(path="embedded:tiny", dtype="float32"),
                      topology=TopologyRecord(tp=1),
                      workload=WorkloadRecord(label_token_ids=[1], num_items=4, requests=None),
                      runs=RunsRecord(warmup=1, timed=2, timeout_s=None),
                      status="ok", started_at="t")
    assert case.topology.devices is None and case.runs.processes == 1
    case.topology = case.topology.with_engine(
        {"mesh_shape": {"tp": 1}, "devices": [{"id": 0, "kind": "cpu"}]})
    data = json.loads(case.model_dump_json())
    assert data["topology"] == {"tp": 1, "mesh_shape": {"tp": 1},
                                "devices": [{"id": 0, "kind": "cpu"}]}
    assert data["workload"] == {"label_token_ids": [1], "num_items": 4, "requests": None}
    assert data["runs"] == {"warmup": 1, "timed": 2, "timeout_s": None}
    assert case.topology.devices[0].kind == "cpu"
    with pytest.raises(ValueError, match="extra"):
        TopologyRecord.model_validate({"tp": 1, "chips": 4})

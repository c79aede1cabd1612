"""Engine keys and case ids (harness/config/keys.py).

Case ids are how runs are compared across revisions, so they must not change by accident:
tests/data/case_ids.json holds every shipped config's ids as the string-building code
before keys.py made them (commit 100f834), with the `topologies` check's tp=1 reference
id of each tp > 1 case (then `case_id.replace("tp=N", "tp=1")`) and the `engines` and
`concurrency` checks' engine labels. A config change that changes ids on purpose
rewrites it: `python tests/test_keys.py` (review the diff: each changed line is a
changed id)."""

from __future__ import annotations

import dataclasses
import json
import pickle
import sys
from pathlib import Path

import pytest

from mibench.harness.config import load_config
from mibench.harness.config.keys import EngineKey, ServerRef, case_id
from mibench.harness.config.matrix import expand
from mibench.harness.run.parity import engine_label, reference_keys

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "case_ids.json"
CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))


def ids_of(path: Path) -> dict:
    cases = expand(load_config(path))
    return {"ids": [c.case_id for c in cases],
            "tp1": {c.case_id: c.id_at(c.engine_key.at_tp1()) for c in cases if c.tp > 1},
            "engine_labels": sorted({engine_label(c) for c in cases})}


EXPECTED = json.loads(FIXTURE.read_text())


def test_the_fixture_covers_every_shipped_config():
    assert sorted(EXPECTED) == [p.name for p in CONFIGS]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_case_ids_are_unchanged(path):
    got, want = ids_of(path), EXPECTED[path.name]
    assert got["ids"] == want["ids"]
    assert got["tp1"] == want["tp1"]
    assert got["engine_labels"] == want["engine_labels"]


def test_the_tp1_reference_id_is_made_from_the_key():
    cases = expand(load_config(ROOT / "configs" / "cpu-topology.yaml"))
    deep = [c for c in cases if c.tp > 1]
    assert deep  # the shipped topology config has tp > 1 cases
    for c in deep:
        tp1 = c.engine_key.at_tp1()
        assert (tp1.engine, tp1.model, tp1.dtype, tp1.tp) == (c.engine, c.model, c.dtype, 1)
        assert f"/tp={c.tp}" in c.case_id and c.id_at(tp1).count("/tp=1") == 1
        assert c.id_at(c.engine_key) == c.case_id  # the same maker made the case's own
    # a tp 1 twin the config also has gets exactly its id
    by_id = {c.case_id for c in cases}
    assert any(c.id_at(c.engine_key.at_tp1()) in by_id for c in deep)


def test_case_id_joins_engine_mode_options_tp_and_axes():
    key = EngineKey("jax", "embedded:tiny", "float32", 4)
    assert case_id(key, "packed", ["mask=segment"], ["q=128"]) == \
        "jax/packed/mask=segment/tp=4/q=128"
    assert case_id(key.at_tp1(), "single") == "jax/single/tp=1"


def test_an_http_key_binds_to_its_server_and_travels_by_value():
    ref = ServerRef(base_url=None, served_model="m", timeout_s=5.0, wire="sglang",
                    launch="LAUNCH")  # any launch: the key only carries it
    key = EngineKey("http", "embedded:tiny", "float32", 1, ref)
    assert key.launch == "LAUNCH" and key.base_url is None and not key.is_jax
    bound = key.bound_to("http://127.0.0.1:9")
    assert bound.base_url == "http://127.0.0.1:9" and bound.launch is None
    assert bound.load_kwargs() == {"model": "embedded:tiny", "dtype": "float32", "tp": 1,
                                   "base_url": "http://127.0.0.1:9", "served_model": "m",
                                   "timeout_s": 5.0, "wire": "sglang"}
    assert {key: 1, bound: 2}[key] == 1 and key != bound  # keys a dict pool
    assert pickle.loads(pickle.dumps(bound)) == bound  # sent to workers like the tuple was
    assert EngineKey("jax", "m", "float32", 1).is_jax
    assert EngineKey("jax", "m", "float32", 1).server_kwargs() == {}
    with pytest.raises(ValueError):
        EngineKey("torch", "m", "float32", 1).bound_to("http://x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        key.tp = 2


def test_parity_needs_the_reference_and_tp1_keys():
    config = load_config(ROOT / "configs" / "cpu-topology.yaml")
    cases = expand(config)
    keys = reference_keys(config, cases)
    assert config.parity.checks == ["modes", "topologies"]
    assert keys == {c.engine_key.at_tp1() for c in cases if c.tp > 1} != set()
    assert all(isinstance(k, EngineKey) and k.tp == 1 for k in keys)


if __name__ == "__main__":  # rewrite the fixture from the current code (see the docstring)
    FIXTURE.write_text(json.dumps({p.name: ids_of(p) for p in CONFIGS}, indent=1,
                                  sort_keys=True))
    print(f"wrote {FIXTURE}", file=sys.stderr)

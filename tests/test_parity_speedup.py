"""The `speedup` parity check: packed items/s over single's, judged on the case records
(runner with a fake engine whose modes sleep for set times, and records built directly),
its config keys, and its row in the report's parity table."""

from __future__ import annotations

import json
import time

import jsonschema
import pytest

from mibench.harness.config import load_config
from mibench.harness.config.spec import ConfigError
from mibench.harness.records import SCHEMA_FILE, CaseRecord, Metrics, Summary, read_artifact
from mibench.harness.report.console import render_summary
from mibench.harness.report.tables import parity_table
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run
from mibench.harness.run.speedup import speedup_checks
from mibench.harness.testing import FakeEngine, fixed_peak, write_config

CONFIG = """
    name: speed
    model: {path: "embedded:tiny"}
    workload: {query_tokens: 12, num_items: 5, item_tokens: 3, label_token_ids: [198],
               delimiter: 151643}
    runs: {warmup: 0, timed: 3}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: segment}
      - {engine: jax, mode: prefill_extend}
    parity: {checks: [speedup]}
"""
SLEEP_S = {"single": 0.03, "packed": 0.001}  # packed at most 30x single, at least ~3x


class SleepyEngine(FakeEngine):
    """The fake engine, with each call of a mode taking at least SLEEP_S[mode]."""

    def score(self, query, items, label_token_ids, mode="single", **kw):
        time.sleep(SLEEP_S.get(mode, 0.0))
        return super().score(query, items, label_token_ids, mode=mode, **kw)


def go(tmp_path, text=CONFIG, sets=(), **engine_kw):
    config = load_config(write_config(tmp_path, text), list(sets))
    factory = lambda name, model, dtype, tp: SleepyEngine(name, model, dtype, tp,  # noqa: E731
                                                          **engine_kw)
    record = run(plan_of(config, out=tmp_path / "out", progress=False, engine_factory=factory,
                         peak=fixed_peak()))
    (path,) = (tmp_path / "out").glob("*.json")
    jsonschema.validate(json.loads(path.read_text()), json.loads(SCHEMA_FILE.read_text()))
    return record


def speed(record):
    return [c for c in record.parity.checks if c.check == "speedup"]


def test_speedup_passes(tmp_path):
    record = go(tmp_path)
    (chk,) = speed(record)
    assert chk.case_id == "jax/packed/mask=segment/tp=1" and chk.against == "jax/single/tp=1"
    cases = {c.case_id: c.metrics.throughput_items_per_s.median for c in record.cases}
    assert chk.throughput_items_per_s == cases[chk.case_id]
    assert chk.against_throughput_items_per_s == cases[chk.against]
    assert chk.speedup == pytest.approx(chk.throughput_items_per_s
                                        / chk.against_throughput_items_per_s)
    assert chk.speedup >= 3 and chk.tolerance == 3 and chk.status == "passed"
    assert record.parity.passed and exit_code(record) == 0


def test_speedup_below_minimum_fails_the_run(tmp_path):
    record = go(tmp_path, sets=["parity.min_speedup=1000"])
    (chk,) = speed(record)
    assert chk.tolerance == 1000 and chk.speedup < 1000 and chk.status == "failed"
    assert all(c.status == "ok" for c in record.cases)  # only the gate failed
    assert not record.parity.passed and exit_code(record) == 3
    line = next(x for x in render_summary(record, "a.json").splitlines() if "speedup" in x)
    assert f"speedup {chk.speedup:.2f}x < 1000x" in line  # the ratio, not a max difference


def test_no_single_case_records_nothing(tmp_path):
    text = CONFIG.replace("      - {engine: jax, mode: single}\n", "")
    record = go(tmp_path, text)
    assert speed(record) == [] and record.parity.passed and exit_code(record) == 0


def test_failed_single_case_records_nothing(tmp_path):
    record = go(tmp_path, fail={"single": RuntimeError("boom")})
    assert speed(record) == [] and record.parity.passed
    assert exit_code(record) == 3  # the failed case itself fails the run


def test_single_of_other_item_count_is_not_compared(tmp_path):
    text = CONFIG.replace("{engine: jax, mode: single}",
                          "{engine: jax, mode: single, workload: {num_items: 4}}")
    assert speed(go(tmp_path, text)) == []


# Records built directly: which single a packed case is compared with.

def case(case_id, mode, items_per_s, num_items=32, tp=1, params=None, status="ok"):
    tput = Summary(median=items_per_s, mean=items_per_s, min=items_per_s, max=items_per_s,
                   stdev=0.0, n=1)
    return CaseRecord(case_id=case_id, engine="jax", mode=mode, params=params or {},
                      model={"path": "embedded:tiny", "dtype": "float32"}, topology={"tp": tp},
                      workload={"label_token_ids": [1], "num_items": num_items,
                                "query_tokens": 20}, runs={"warmup": 0, "timed": 1},
                      status=status, started_at="t", metrics=Metrics(throughput_items_per_s=tput))


def test_speedup_pairs_same_workload_and_tp():
    records = [case("s8", "single", 10.0, num_items=8), case("s32", "single", 10.0),
               case("p8", "packed", 20.0, num_items=8), case("p32", "packed", 50.0),
               case("p32tp2", "packed", 50.0, tp=2), case("c32", "chunked", 50.0)]
    out = {c.case_id: (c.against, c.speedup, c.status) for c in speedup_checks(records, 3.0)}
    assert out == {"p8": ("s8", 2.0, "failed"), "p32": ("s32", 5.0, "passed")}
    gated = speedup_checks(records, 3.0, items=[32])
    assert [(c.case_id, c.status) for c in gated] == [("p32", "passed")]


def test_speedup_prefers_default_single_and_skips_failed():
    records = [case("s-pallas", "single", 5.0, params={"attention": "pallas"}),
               case("s", "single", 10.0), case("p", "packed", 30.0)]
    (chk,) = speedup_checks(records, 3.0)
    assert chk.against == "s" and chk.speedup == 3.0 and chk.status == "passed"  # >= passes
    records[1] = case("s", "single", 10.0, status="failed")
    (chk,) = speedup_checks(records, 3.0)
    assert chk.against == "s-pallas" and chk.speedup == 6.0


def test_report_shows_ratio_against_minimum(tmp_path):
    record = go(tmp_path)
    table = parity_table([record])
    (row,) = table.rows
    assert "Max abs diff / speedup" in table.header and "Tolerance / minimum" in table.header
    assert row[0] == "speedup" and row[3].endswith(" items/s)") and "x (" in row[3]
    assert row[6] == ">= 3.00x" and row[7] == "passed" and "speedup" in table.note
    (tmp_path / "f").mkdir()
    failed = go(tmp_path / "f", sets=["parity.min_speedup=1000"])
    assert parity_table([failed]).rows[0][7] == "**FAILED**"


def test_old_artifacts_still_load_and_render():
    record = read_artifact("tests/data/run-cpu-smoke.json")
    table = parity_table([record])
    assert table is not None and "Max abs diff" in table.header and table.note is None


# Config keys.

@pytest.mark.parametrize("value", ["0", "-1", "fast", "true", ".inf", "[3]"])
def test_bad_min_speedup_names_the_key(tmp_path, value):
    text = CONFIG.replace("{checks: [speedup]}", f"{{checks: [speedup], min_speedup: {value}}}")
    with pytest.raises(ConfigError) as e:
        load_config(write_config(tmp_path, text))
    assert "parity.min_speedup" in str(e.value) and "c.yaml:10:" in str(e.value)


def test_bad_speedup_items_names_the_key(tmp_path):
    text = CONFIG.replace("{checks: [speedup]}", "{checks: [speedup], speedup_items: [0]}")
    with pytest.raises(ConfigError, match=r"parity\.speedup_items"):
        load_config(write_config(tmp_path, text))


def test_min_speedup_without_the_check_is_harmless(tmp_path):
    text = CONFIG.replace("{checks: [speedup]}", "{checks: [], min_speedup: 2.5}")
    config = load_config(write_config(tmp_path, text))
    assert config.parity.min_speedup == 2.5 and config.parity.checks == []
    # the report's reproduce commands switch parity off on the shipped config this way
    config = load_config("configs/model-matrix.yaml", ["parity.checks=[]"])
    assert config.parity.min_speedup == 3 and config.parity.speedup_items == [32]


def test_default_min_speedup_stays_out_of_the_config_hash(tmp_path):
    config = load_config(write_config(tmp_path, CONFIG))
    assert config.parity.min_speedup == 3.0 and "min_speedup" not in config.resolved()["parity"]

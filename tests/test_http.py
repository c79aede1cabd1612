"""The `http` engine and `engine: http` cases: a config loads a server (mibench serve, or a
fake one) closed loop and open loop, records every request, fails on errors past
max_error_rate, survives a dead server, and passes parity against the torch reference."""

from __future__ import annotations

import asyncio
import itertools
import json
import socket

import jsonschema
import numpy as np
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from mibench.engines import Engine, InputError, MibenchError, load_engine
from mibench.harness.config import ConfigError, load_config
from mibench.harness.config.keys import EngineKey, ServerRef
from mibench.harness.config.matrix import expand
from mibench.harness.records import SCHEMA_FILE, read_artifact
from mibench.harness.report.tables import results_matrix, rows_of
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run
from mibench.harness.serve import Served
from mibench.harness.stats.describe import nearest_rank
from mibench.harness.testing import fixed_peak, write_config
from mibench.harness.under_test import report_latency as latency
from mibench.harness.under_test.send import arrivals
from mibench.workloads import WorkloadSpec, materialize

DELIM = 151643
LABELS = [198, 9834]
SCHEMA = json.loads(SCHEMA_FILE.read_text())


def dead_url() -> str:
    """A 127.0.0.1 port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def config(tmp_path, cases: str, parity: str = "", sets=()):
    text = f"""
        name: http
        model: {{path: "embedded:tiny"}}
        workload: {{query_tokens: 16, num_items: 4, item_tokens: 3,
                   label_token_ids: [198, 9834], delimiter: 151643, seed: 7}}
        cases:
{cases}
{parity}
    """
    return load_config(write_config(tmp_path, text), list(sets))


def go(tmp_path, cases: str, parity: str = "", workers: bool = False):
    record = run(plan_of(config(tmp_path, cases, parity), out=tmp_path / "out", progress=False,
                         peak=fixed_peak(), workers=workers))
    (path,) = (tmp_path / "out").glob("*.json")
    jsonschema.validate(json.loads(path.read_text()), SCHEMA)
    assert read_artifact(path).cases == record.cases
    return record


def test_http_engine_keeps_the_contract(served, jax_tiny, make_request):
    engine = load_engine("http", model="embedded:tiny", base_url=served.url)
    assert isinstance(engine, Engine) and engine.modes == ("single",)
    assert engine.model_config.vocab_size == 151936
    assert engine.special_ids == jax_tiny.special_ids and engine.encode("ab") == [97, 98]
    assert engine.topology == {"tp": 1, "base_url": served.url}
    assert engine.resolved_options("single", {})["server"]["delimiter"] == DELIM
    query, items = make_request(5, query_len=16, num_items=3, item_len=3)
    got = engine.score(query, items, LABELS, delimiter=DELIM)
    assert got.scores == jax_tiny.score(query, items, LABELS, mode="packed",
                                        delimiter=DELIM).scores
    with pytest.raises(InputError, match=r"^items\[1\]: token id 999999 .* outside"):
        engine.score(query, [[5], [999999]], LABELS, delimiter=DELIM)
    with pytest.raises(InputError, match="^delimiter: the server .* scores with delimiter"):
        engine.score(query, items, LABELS)  # plain: the server scores delimited
    dead = load_engine("http", model="embedded:tiny", base_url=dead_url())
    with pytest.raises(MibenchError, match="^base_url: .*refused"):
        dead.score(query, items, LABELS, delimiter=DELIM)
    other = load_engine("http", model="Qwen/Qwen3-0.6B", base_url=served.url)
    assert other.model_config is None and other.special_ids == frozenset()


@pytest.mark.parametrize("kwargs,field", [
    ({}, "base_url"), ({"base_url": "ftp://x"}, "base_url"),
    ({"base_url": "http://h:1", "timeout_s": 0}, "timeout_s"),
    ({"base_url": "http://h:1", "served_model": ""}, "served_model"),
])
def test_http_engine_arguments(kwargs, field):
    with pytest.raises(MibenchError) as e:
        load_engine("http", model="embedded:tiny", **kwargs)
    assert e.value.field == field
    with pytest.raises(MibenchError, match="^base_url: only the http engine"):
        load_engine("jax", base_url="http://h:1")


@pytest.mark.slow
def test_closed_and_open_loop_record_latencies_and_parity(tmp_path, served, jax_tiny):
    cases = f"""
          - {{engine: http, mode: single, base_url: "{served.url}", clients: 2, requests: 8}}
          - {{engine: http, mode: single, base_url: "{served.url}", rate: 20, requests: 8,
             served_model: "embedded:tiny"}}
    """
    parity = "        parity: {checks: [engines]}"
    record = go(tmp_path, cases, parity)
    assert exit_code(record) == 0, [(c.case_id, c.error) for c in record.cases]
    closed, open_ = record.cases
    # request 0 is the workload itself: the case's scores are the engine's on it
    spec = WorkloadSpec(query_tokens=16, num_items=4, item_tokens=3,
                        label_token_ids=tuple(LABELS), delimiter=DELIM, seed=7)
    (base,) = materialize(spec, 151936, exclude=jax_tiny.special_ids)
    want = jax_tiny.score(list(base.query), [list(i) for i in base.items], LABELS,
                          mode="packed", delimiter=DELIM).scores
    assert closed.case_id == "http/single/clients=2/tp=1"
    assert open_.case_id == "http/single/rate=20/served=embedded:tiny/tp=1"
    for case, load in ((closed, "closed"), (open_, "open")):
        m = case.http
        assert case.status == "ok" and m.load == load and m.sent == m.ok == 8
        assert m.errors == {} and m.error_rate == 0 and m.warmup_errors == {}
        assert len(m.requests) == 8 and all(r.status == 200 and r.items == 4
                                            for r in m.requests)
        lat = m.latency
        assert 0 < lat.p50_ms <= lat.p90_ms <= lat.p99_ms <= lat.max_ms and lat.n == 8
        assert m.requests_per_s > 0 and m.items_per_s == pytest.approx(4 * m.requests_per_s)
        assert case.metrics.throughput_items_per_s.median == m.items_per_s
        assert case.timed_s == [m.duration_s] and len(case.warmup_s) == 1
        assert case.scores == [want] and len(case.metrics.score_digest) == 64
        assert case.resolved["server"]["mode"] == "packed"
        assert case.params["base_url"] == served.url and case.params["requests"] == 8
    assert all(r.lag_s is None for r in closed.http.requests)
    assert all(r.lag_s is not None for r in open_.http.requests)
    sent = [r.sent_s for r in open_.http.requests]
    assert sent == sorted(sent) and sent[-1] > 0.1  # paced, not sent at once
    # the achieved rate: ok requests over the load's duration (at most the offered 20/s,
    # give or take the Poisson draw)
    assert open_.http.requests_per_s == pytest.approx(8 / open_.http.duration_s)
    (check,) = record.parity.checks  # the server's scores against the torch reference
    assert (check.check, check.case_id, check.against) == ("engines", "http/single/tp=1",
                                                           "torch/single/float32")
    assert check.status == "passed" and record.parity.passed
    # the report's latency section: a table row per http case, a CDF plot
    rows = rows_of([record])
    matrix = results_matrix(rows)  # an http case's time is its load, not "time for N items"
    assert not any(h.startswith("Time") for h in matrix.header)  # latency says it already
    assert "load of many requests" in matrix.note
    table = latency.latency_table(rows)
    assert [r[0] for r in table.rows] == [closed.case_id, open_.case_id]
    assert "p99 ms" in table.header and table.markdown().count("\n") == 3
    png = latency.cdf_chart(rows, tmp_path / "cdf.png")
    assert png is not None and png.stat().st_size > 1000


def test_each_request_has_its_own_query_unless_same_query(tmp_path, served):
    seen = []
    app = FastAPI()

    @app.post("/v1/score")
    async def score(request: Request):
        body = await request.json()
        seen.append(tuple(body["query"]))
        return {"scores": [[0.5, 0.5]] * len(body["items"]), "model": "x", "object": "scoring"}

    with Served(app) as fake:
        cases = f"""
          - {{engine: http, mode: single, base_url: "{fake.url}", clients: 1, requests: 3}}
          - {{engine: http, mode: single, base_url: "{fake.url}", clients: 1, requests: 3,
             warmup_requests: 0, same_query: true}}
        """
        record = go(tmp_path, cases)
    assert [c.status for c in record.cases] == ["ok", "ok"]
    assert len(set(seen[:4])) == 4 and len(set(seen[4:])) == 1 and seen[4] == seen[0]


def flaky_app(counter):
    """A fake server: request n (from 0) is scored, except n % 4 == 1 (500, `boom n`) and
    n % 4 == 3 (429, busy). Wrong scores: test_http_misbehaving.py."""
    app = FastAPI()

    @app.post("/v1/score")
    async def score(request: Request):
        n = next(counter)
        body = await request.json()
        if n % 4 == 1:
            return JSONResponse({"error": f"boom {n}"}, status_code=500)
        if n % 4 == 3:
            return JSONResponse({"error": "busy"}, status_code=429)
        return {"scores": [[0.1, 0.2]] * len(body["items"]), "model": "fake",
                "object": "scoring"}

    @app.post("/slow/v1/score")
    async def slow(request: Request):
        await asyncio.sleep(1.0)
        return {"scores": []}

    return app


@pytest.mark.slow
def test_errors_past_max_error_rate_fail_the_case(tmp_path):
    with Served(flaky_app(itertools.count())) as fake:
        cases = f"""
          - {{engine: http, mode: single, base_url: "{fake.url}", clients: 1, requests: 8,
             max_error_rate: 0.2}}
          - {{engine: http, mode: single, base_url: "{fake.url}/slow", clients: 2,
             requests: 2, warmup_requests: 0, timeout_s: 0.2, max_error_rate: 1}}
        """
        record = go(tmp_path, cases)
    flaky, slow = record.cases
    assert flaky.status == "failed" and flaky.error.type == "HttpErrors"
    m = flaky.http
    assert m.sent == 8 and m.ok == 4 and m.errors == {"500": 2, "429": 2}
    assert m.error_rate == 0.5 and m.first_error == '500: {"error":"boom 1"}'
    assert "4 of 8 requests failed (50.0%, more than max_error_rate 0.2)" in flaky.error.message
    assert 'boom 1' in flaky.error.message
    assert m.latency.n == 4 and len(m.requests) == 8  # latencies kept
    assert [r.status for r in m.requests] == [500, 200, 429, 200] * 2
    assert "busy" in m.requests[2].error
    assert slow.status == "ok" and slow.http.errors == {"timeout": 2}  # allowed: rate 1
    assert slow.http.latency is None and slow.metrics.throughput_items_per_s is None
    assert exit_code(record) == 3


@pytest.mark.slow
def test_dead_server_fails_its_case_and_the_run_goes_on(tmp_path):
    dead = dead_url()
    cases = f"""
          - {{engine: http, mode: single, base_url: "{dead}", clients: 2, requests: 3,
             warmup_requests: 0}}
          - {{engine: http, mode: single, base_url: "{dead}", rate: 50, requests: 3}}
    """
    record = go(tmp_path, cases, workers=True)  # the http engine in a worker process
    loaded, probed = record.cases
    assert loaded.status == "failed" and loaded.http.errors == {"refused": 3}
    assert "3 of 3 requests failed" in loaded.error.message
    assert "refused" in loaded.http.first_error and loaded.http.latency is None
    assert probed.status == "failed" and probed.http.warmup_errors == {"refused": 1}
    assert probed.http.sent == 0 and "the load was not sent" in probed.error.message
    assert exit_code(record) == 3


def test_a_server_killed_mid_case_fails_it_and_the_run_goes_on(tmp_path, served):
    """The server stops after its 3rd answer (warmup included): the case fails with the
    refused requests as its error; the next case (another server) is measured."""
    app = FastAPI()
    counter = itertools.count()
    holder = {}

    @app.post("/v1/score")
    async def score(request: Request):
        body = await request.json()
        if next(counter) == 2:
            holder["server"].server.should_exit = True  # answers this one, then is gone
            holder["server"].sock.close()
            await asyncio.sleep(0.3)  # uvicorn's shutdown has begun: no keep-alive after
        return {"scores": [[0.1, 0.2]] * len(body["items"]), "model": "x", "object": "scoring"}

    with Served(app) as dying:
        holder["server"] = dying
        cases = f"""
          - {{engine: http, mode: single, base_url: "{dying.url}", clients: 1, requests: 6,
             warmup_requests: 1, timeout_s: 5}}
          - {{engine: http, mode: single, base_url: "{served.url}", clients: 2, requests: 2}}
        """
        record = go(tmp_path, cases)
    killed, after = record.cases
    assert killed.status == "failed" and killed.http.ok == 2 and killed.http.sent == 6
    assert set(killed.http.errors) <= {"refused", "connection"}
    assert sum(killed.http.errors.values()) == 4
    assert "4 of 6 requests failed" in killed.error.message and killed.http.first_error
    assert after.status == "ok" and after.http.ok == 2
    assert exit_code(record) == 3


@pytest.mark.parametrize("case,where,needle", [
    ("{engine: jax, mode: single, clients: 2}", "cases.0.clients",
     "clients is a key of http cases"),
    ("{engine: http, mode: single, clients: 2}", "cases.0.engine", "needs base_url"),
    ("{engine: http, mode: single, base_url: 'http://h:1'}", "cases.0.engine",
     "clients: N (closed loop"),
    ("{engine: http, mode: single, base_url: 'http://h:1', clients: 1, rate: 2}",
     "cases.0.rate", "not both"),
    ("{engine: http, mode: single, base_url: 'h:1', clients: 1}", "cases.0.base_url",
     "expected http://HOST"),
    ("{engine: http, mode: single, base_url: 'http://h:1', clients: 0}", "cases.0.clients",
     "greater than 0"),
    ("{engine: http, mode: single, base_url: 'http://h:1', rate: 2, max_error_rate: 2}",
     "cases.0.max_error_rate", "less than or equal to 1"),
    ("{engine: http, mode: packed, base_url: 'http://h:1', rate: 2}", "cases.0.mode",
     "unknown mode 'packed' for engine http"),
])
def test_http_keys_are_checked(tmp_path, case, where, needle):
    with pytest.raises(ConfigError) as e:
        config(tmp_path, f"          - {case}")
    assert where in str(e.value) and needle in str(e.value), str(e.value)


def test_http_case_ids_and_constant_tokens(tmp_path):
    url = "http://127.0.0.1:1"
    cfg = config(tmp_path, f"""
          - {{engine: http, mode: single, base_url: "{url}", clients: [1, 4]}}
          - {{engine: http, mode: single, base_url: "{url}", rate: [2.5, 10], same_query: true}}
    """)
    cases = expand(cfg)
    assert [c.case_id for c in cases] == [
        "http/single/clients=1/tp=1", "http/single/clients=4/tp=1",
        "http/single/rate=2.5/same_query=true/tp=1", "http/single/rate=10/same_query=true/tp=1"]
    assert cases[0].engine_key == EngineKey("http", "embedded:tiny", "float32", 1, ServerRef(
        base_url=url, served_model=None, timeout_s=60.0, wire="sglang"))
    assert cases[0].http.requests == 100 and cases[0].http.warmup_requests == 1
    assert (cases[0].runs.warmup, cases[0].runs.timed, cases[0].runs.processes) == (0, 1, 1)
    with pytest.raises(ConfigError, match="every request is the same"):
        config(tmp_path, f"          - {{engine: http, mode: single, base_url: '{url}', "
                         "clients: 1}", sets=["workload.tokens=constant"])


def test_arrivals_are_seeded_poisson_and_percentiles_nearest_rank():
    a, b = arrivals(4000, 20.0, seed=3), arrivals(4000, 20.0, seed=3)
    assert a[0] == 0 and np.array_equal(a, b) and np.all(np.diff(a) > 0)
    assert np.mean(np.diff(a)) == pytest.approx(1 / 20, rel=0.05)
    assert not np.array_equal(a, arrivals(4000, 20.0, seed=4))
    values = [float(v) for v in range(1, 101)]
    assert [nearest_rank(values, p) for p in (50, 90, 99, 100)] == [50, 90, 99, 100]
    assert nearest_rank([7.0], 99) == 7.0

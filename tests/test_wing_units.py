"""The servers-under-test wing's pure parts, in the fast tier (no server starts here: the
tests that launch one are slow): the prefix-cache check's judgement against its control,
the server A/B's cold-start rounds judged by the paired test, the fake server's scores,
and the hand-built cases of the developer jobs that drive the wing."""

from __future__ import annotations

import sys
import types

import pytest

from mibench.errors import MibenchError
from mibench.harness.jobs import score_checks
from mibench.harness.records import ColdStartLaunch, ConcurrencyTrial
from mibench.harness.records.ab import ABCase
from mibench.harness.testing import fake_server
from mibench.harness.under_test import ab, metrics, prefix_cache
from mibench.harness.under_test.jobs import invariance_serve, score_checks_serve, serve_flood
from mibench.harness.verdicts import COLD_START_REGRESSION, UNCHANGED


def trials(statuses: str, diff: float = 0.0) -> list[ConcurrencyTrial]:
    return [ConcurrencyTrial(trial=t, status={"p": "passed", "f": "failed"}[s],
                             max_log_diff=diff if s == "f" else 0.0,
                             moved_items=int(s == "f"), moved_requests=int(s == "f"),
                             moved=[f"request 0 item {t}: d ln {diff:g}"] if s == "f" else [])
            for t, s in enumerate(statuses)]


def test_a_cache_that_moves_scores_fails_and_a_clean_control_blames_the_cache():
    check = prefix_cache.judge("prefix cache", "cold", 1e-5, trials("fff", 0.3),
                               trials("ppp"), {"cache_off": True}, 0.0, apart=[0.0])
    assert check.status == "failed" and check.control.fails == 0
    assert "the control (cache off: cache_off=True) failed 0 of 3" in check.error
    assert check.error.endswith("the control held: the cache's doing")


def test_a_control_that_fails_too_says_it_is_not_the_cache_alone():
    check = prefix_cache.judge("prefix cache", "cold", 1e-5, trials("fff", 0.3),
                               trials("fpf", 0.3), {"cache_off": True}, 0.0)
    assert check.status == "failed" and check.control.fails == 2
    assert "not the cache alone" in check.error


def test_a_cache_that_holds_passes_and_says_its_first_answers_apart():
    check = prefix_cache.judge("prefix cache", "cold", 1e-5, trials("ppp"), trials("ppp"),
                               {"cache_off": True}, 0.0, apart=[0.5])
    assert check.status == "passed"
    assert "beyond the tolerance: the cache changes scores before anything is warm" \
        in check.error


def _cold_case(monkeypatch, ready: dict[str, float]):
    def one_launch(case, pool, key, r):
        return ColdStartLaunch(launch=r, ready_s=ready[pool] * (1 + 0.01 * r), first_ms=50.0)

    monkeypatch.setattr(metrics.cold_start, "one_launch", one_launch)
    case = types.SimpleNamespace(http=types.SimpleNamespace(warm_requests=2), engine_key=None,
                                 case_id="http/single")
    ab = ABCase.model_construct(case_id="http/single", verdict=UNCHANGED, why="",
                                cold_start={}, cold_timing={})
    order = [["base", "new"] if r % 2 == 0 else ["new", "base"] for r in range(6)]
    metrics.cold_rounds(case, {"base": "base", "new": "new"}, order, ab, 0.05, 0.05,
                        lambda _: None)
    return ab


def test_a_server_twice_as_slow_to_come_up_is_a_cold_start_regression(monkeypatch):
    ab = _cold_case(monkeypatch, {"base": 1.0, "new": 2.0})
    assert ab.verdict == COLD_START_REGRESSION and ab.why.startswith("cold start: launch to")
    assert len(ab.cold_start["new"].launches) == 6
    assert ab.cold_timing["first request"].verdict != "regression"  # the same first request


def test_the_same_cold_start_on_both_sides_is_no_regression(monkeypatch):
    ab = _cold_case(monkeypatch, {"base": 1.0, "new": 1.0})  # control
    assert ab.verdict == UNCHANGED and ab.why == ""


def test_the_fake_servers_scores_are_probabilities_that_differ_and_shift_when_warm(
        monkeypatch):
    monkeypatch.setattr(fake_server, "ARGS", types.SimpleNamespace(inflight_shift=0.0,
                                                                   warm_shift=0.5))
    req = {"query": [1, 2], "items": [[3], [4], [5]], "label_token_ids": [198, 9834]}
    cold, warm = fake_server.scores(req, 0), fake_server.scores(req, 0, warm=True)
    assert all(abs(sum(r) - 1) < 1e-12 for r in cold) and len({r[0] for r in cold}) == 3
    assert cold == fake_server.scores(req, 5)  # no in-flight shift asked: none
    assert all(w[0] > c[0] for w, c in zip(warm, cold, strict=True))


def test_the_jobs_hand_built_server_cases_are_valid_configs(tmp_path):
    config = score_checks.config(score_checks_serve.serve_cases() + [
        score_checks_serve.fake_cache_case(0.01)], tmp_path, ["prefix_cache"])
    assert [c.engine for c in config.cases] == ["http"] * (
        len(score_checks_serve.serve_cases()) + 1)
    launch = invariance_serve._launch("packed")
    assert dict(launch.args) == {"mode": "packed", "delimiter": invariance_serve.DELIM}
    assert "mibench.harness.testing.fake_server" in invariance_serve.FAKE.launch.command


def test_the_wings_jobs_come_with_its_case_kind_and_are_mibench_jobs():
    """`mibench job` reaches the jobs that measure servers through the case kind that brings
    them (harness/case_kinds.py `kind_job`), never by importing the wing."""
    from mibench.harness.case_kinds import kind_job
    from mibench.harness.commands.job import job_app
    from mibench.harness.under_test.jobs import JOBS, http_overhead

    assert kind_job("http-overhead") is http_overhead.report
    assert kind_job("serve-flood") is serve_flood.main
    assert kind_job("invariance") is invariance_serve.serve_rows
    assert kind_job("score-checks") is score_checks_serve.server_rows
    assert set(JOBS) <= {c.name for c in job_app.registered_commands}  # each a job's name
    with pytest.raises(AssertionError, match="no case kind brings the job 'gpu'"):
        kind_job("gpu")  # control: a core job is no kind's


class NoServers:
    """A run's server pool that launches nothing (`open_servers`), counting its calls."""

    released = closed = 0

    def bind(self, key):
        return key

    def release(self, keep):
        self.released += 1

    def close(self):
        self.closed += 1


def test_score_checks_server_rows_say_serve_its_mode_and_the_fault_in_the_http_engine(
        monkeypatch, tmp_path):
    """The wing names the rows of each launched `mibench serve` (the core job's rows say the
    case's engine and mode: http, single); the checks and the pool are stand-ins here."""
    from mibench.harness import case_kinds

    servers = NoServers()

    def measure_case(case, pool, spec, launched):
        assert launched is servers and (case.engine, case.mode) == ("http", "single")
        return [score_checks.Row(case.engine, case.mode, "", "order", "bitwise", 0.0,
                                 "passed", "item order", 1.0, "failed")]

    monkeypatch.setattr(case_kinds, "open_servers", lambda folder: servers)
    monkeypatch.setattr(score_checks_serve, "measure_case", measure_case)
    monkeypatch.setattr(score_checks_serve, "prefix_rows", lambda folder: [])
    rows = score_checks_serve.server_rows(tmp_path, None)
    assert [(r.engine, r.mode) for r in rows] == [
        ("serve", m) for m in invariance_serve.SERVE_MODES]
    assert {r.fault for r in rows} == {"item order (in the http engine)"}
    assert servers.released == len(rows) and servers.closed == 1


def test_the_flood_jobs_percentile_of_nothing_is_none():
    assert serve_flood.nearest_rank([], 90) is None
    assert serve_flood.nearest_rank([3.0, 1.0, 2.0, 4.0], 50) == 2.0
    assert serve_flood.nearest_rank([3.0, 1.0, 2.0, 4.0], 90) == 4.0


def test_a_server_ab_side_names_its_interpreter_and_refuses_a_missing_one(tmp_path):
    side = ab.python_side("new", sys.executable)
    assert side.python == sys.executable and side.subject == f"interpreter {sys.executable}"
    with pytest.raises(MibenchError, match=r"is not a file \(give the server's interpreter\)") \
            as e:
        ab.python_side("base", str(tmp_path / "no-python"))
    assert e.value.field == "--base-python"


def test_a_server_ab_of_a_config_without_launched_servers_is_refused(tmp_path):
    config = score_checks.config([{"engine": "jax", "mode": "single"}], tmp_path, [])
    with pytest.raises(MibenchError, match="has no http case with a launch section") as e:
        ab.launched_cases(config, None)
    assert e.value.field == "--server-repo"
    served = score_checks.config(score_checks_serve.serve_cases(), tmp_path, [])  # control
    assert [c.engine for c in ab.launched_cases(served, None)] == ["http"] * len(
        score_checks_serve.serve_cases())

"""Servers under test, step two, end to end with launched servers (harness/testing/fake_server.py,
and `mibench serve`): the capacity search against a server of known capacity, the
`concurrency` check over fresh launches (a server whose scores move with what is in flight
must fail it, `mibench serve` must pass), cold starts per launch, their report, and `ab`
judging capacity and cold starts. Bounds are relative to what the fake server is told to
do (its service time) or measured here, never to this machine's absolute speed."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.records import read_artifact
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run

pytestmark = pytest.mark.slow  # every test here starts servers

HEAD = """name: step2
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 16, num_items: 3, item_tokens: 2, label_token_ids: [10, 20],
           apply_softmax: true, seed: 0}
runs: {timeout_s: 600}
"""
FAKE = ('["{python}", "-m", "mibench.harness.testing.fake_server", "{port}"')
SERVE = ('["{python}", "-m", "mibench.harness.cli", "serve", "--model", "{model}", '
         '"--host", "{host}", "--port", "{port}", "--dtype", "{dtype}"]')


def fake(*flags: str) -> str:
    words = "".join(f', "{f}"' for f in flags)
    return textwrap.dedent(f"""
        launch:
          name: fake
          command: {FAKE}{words}]
          ready: {{path: /get_server_info, timeout_s: 60}}
          stop: {{grace_s: 2}}
        """)


def run_config(tmp_path: Path, body: str, name: str = "c.yaml"):
    path = tmp_path / name
    path.write_text(HEAD + textwrap.dedent(body))
    record = run(plan_of(load_config(path), out=tmp_path / name.removesuffix(".yaml"),
                         progress=False))
    return record


def case_body(launch: str, extra: str) -> str:
    return ("cases:\n  - engine: http\n"
            + textwrap.indent(launch.strip() + "\n" + extra, "    ") + "\n")


SERIAL_MS = 40.0  # the fake server's service time, one request at a time


def test_capacity_of_a_serial_server_is_found_below_its_limit(tmp_path):
    record = run_config(tmp_path, case_body(
        fake("--serial-ms", str(SERIAL_MS)),
        "slo: {p90_ms: 200, start_rate: 10, precision: 0.5, repeats: 3}"))
    (case,) = record.cases
    assert case.status == "ok", case.error
    s = case.slo
    # the search stops at the knee of this one-at-a-time server, where its repeats may miss
    # (backed off one precision step then, twice at most; `not held` if none holds): the
    # search itself is what is tested
    assert s.status in ("found", "not held"), s.note
    assert s.requests_per_step == 36 and "36" in s.samples_why
    # the budget binds between them, within precision
    assert s.rate < s.bound <= s.rate * 1.5 * (1 + 1e-9)
    assert s.bound <= max(x.rate for x in s.steps)  # a rate tried above it missed
    # one request at a time, SERIAL_MS each: no rate above 1000 / SERIAL_MS is sustainable
    assert s.rate <= 1.25 * 1000 / SERIAL_MS
    missed = [x for x in s.steps if not x.meets]
    assert missed and all(x.rate > s.rate for x in missed)
    assert any(x.stopped_early for x in missed)  # a certain miss stops sending
    assert len(s.repeats) == 3 and len(case.timed_s) == 3 and s.items_per_s > 0
    assert case.http is not None and case.http.sent == 36  # the first repeat's requests
    assert all(x.percentile_ms and x.p50_ms <= x.percentile_ms for x in s.steps)
    out = tmp_path / "report.md"
    assert CliRunner().invoke(app, ["report", str(next((tmp_path / "c").glob("*.json"))),
                                    "--out", str(out)]).exit_code == 0
    text = out.read_text()
    assert "Capacity under a latency budget" in text and "p90 <= 200 ms" in text
    assert (tmp_path / "report-capacity.png").is_file()


def test_a_step_far_past_capacity_stops_on_requests_in_flight_past_the_budget(tmp_path):
    """A server at a tenth of the rate offered answers its first request only after 0.5 s;
    the requests still in flight past the 200 ms budget decide the miss (4 of 36 at p90),
    so the step stops sending long before the 36 arrivals (1.8 s) are all out: waiting for
    4 answers over the budget would send all of them."""
    record = run_config(tmp_path, case_body(
        fake("--serial-ms", "500"),
        "slo: {p90_ms: 200, start_rate: 20, min_rate: 19, max_rate: 40, repeats: 1}"))
    (case,) = record.cases
    s = case.slo
    assert s.status == "not met", s.note
    first = s.steps[0]
    assert first.rate == 20 and first.stopped_early and not first.meets
    assert first.sent <= 18, first  # the old rule (answers only) sent all 36
    assert first.over_budget >= 4 and first.ok == first.sent  # every request was answered


def test_a_budget_that_never_binds_claims_no_capacity(tmp_path):
    record = run_config(tmp_path, case_body(
        fake(), "slo: {p50_ms: 60000, start_rate: 10, max_rate: 20, repeats: 1}"))
    (case,) = record.cases
    assert case.slo.status == "not bound" and case.slo.rate is None
    assert "never bound" in case.slo.note and [x.rate for x in case.slo.steps] == [10, 20]
    assert case.slo.requests_per_step == 6  # the least p50 needs


def test_scores_that_move_with_what_is_in_flight_fail_concurrency_over_trials(tmp_path):
    record = run_config(tmp_path, case_body(
        fake("--inflight-shift", "0.01"),
        "clients: 1\nrequests: 2\nconcurrency: {trials: 3, max_fail_rate: 0.2}") +
        "parity: {checks: [concurrency]}\n")
    (check,) = record.parity.checks
    assert check.status == "failed" and exit_code(record) == 3, check.error
    assert (check.fails, len(check.trials)) == (3, 3) and check.fail_rate == 1.0
    assert check.fail_low == pytest.approx(0.292, abs=0.01) and check.fail_high == 1.0
    assert "Clopper-Pearson" in check.interval and "3 of 3 trials failed" in check.error
    for t in check.trials:
        assert t.status == "failed" and t.moved_items > 0 and t.moved_requests > 0
        assert t.startup_s > 0 and t.when and t.moved  # a fresh launch each, when it moved


def test_mibench_serve_passes_concurrency_on_a_fresh_launch(tmp_path):
    launch = f"launch:\n  name: serve\n  command: {SERVE}\n  ready: {{timeout_s: 300}}"
    record = run_config(tmp_path, case_body(
        launch, "clients: 1\nrequests: 1\nwarmup_requests: 0\nconcurrency: {trials: 1}") +
        "parity: {checks: [concurrency]}\n")
    (case,), (check,) = record.cases, record.parity.checks
    # one trial keeps the check's one-outcome shape: no list of trials, its fail count
    assert check.status == "passed" and (check.fails, check.trials) == (0, [])
    assert check.fail_high < 1.0 and check.max_log_diff == 0.0
    assert case.status == "ok" and case.cold_start is None


def test_a_first_request_that_waits_is_a_cold_start_compare_flags(tmp_path):
    body = "clients: 1\nrequests: 1\ncold_start: {launches: 3, warm_requests: 3}"
    quick = run_config(tmp_path, case_body(fake(), body), "quick.yaml")
    slow = run_config(tmp_path, case_body(fake("--first-ms", "400"), body), "quick.yaml")
    assert quick.cases[0].case_id == slow.cases[0].case_id
    warm = max(x.first_ms for x in quick.cases[0].cold_start.launches)
    assert all(x.first_ms >= 400 for x in slow.cases[0].cold_start.launches)
    assert warm < 200, "the quick server's first answer took as long as the injected wait"
    arts = sorted((tmp_path / "quick").glob("*.json"), key=lambda p: p.stat().st_mtime)
    result = CliRunner().invoke(app, ["compare", str(arts[0]), str(arts[1]),
                                      "--allow-untested"])
    assert result.exit_code == 1, result.output
    assert "cold start regression" in result.output
    assert read_artifact(arts[1]).cases[0].cold_start.first_ms >= 400


AB_CONFIG = """name: ab-capacity
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 16, num_items: 3, item_tokens: 2, label_token_ids: [10, 20],
           apply_softmax: true, seed: 0}
cases:
  - engine: http
    launch:
      name: fake
      command: ["{python}", "-m", "fakeserver", "{port}"]
      ready: {path: /get_server_info, timeout_s: 60}
      stop: {grace_s: 2}
      repo_path: "."
    slo: {p90_ms: 400, start_rate: 8, max_rate: 64, precision: 0.5, repeats: 3}
    cold_start: {launches: 3, warm_requests: 2}
"""


# a long scenario (nox -s scenarios); its small version:
# tests/test_server_ab.py
@pytest.mark.scenario
def test_ab_judges_a_server_revision_with_a_third_of_the_capacity_and_a_slow_first_answer(
        tmp_path, monkeypatch):
    from test_server_ab import git

    from mibench.harness.records import read_ab

    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    repo = tmp_path / "server"
    repo.mkdir()
    git(repo, "init", "-q")
    source = (Path(__file__).parents[1] / "harness" / "testing" / "fake_server.py").read_text()
    defaults = "serial_ms: float = 0.0"
    first = "first_ms: float = 0.0"
    assert defaults in source and first in source
    (repo / "fakeserver.py").write_text(source.replace(defaults, defaults.replace("0.0", "40")))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "40 ms a request")
    (repo / "fakeserver.py").write_text(source.replace(defaults, defaults.replace("0.0", "120"))
                                        .replace(first, first.replace("0.0", "400")))
    git(repo, "commit", "-qam", "120 ms a request, the first 400 ms more")
    config = tmp_path / "ab.yaml"
    config.write_text(AB_CONFIG)
    result = CliRunner().invoke(app, ["ab", "HEAD~1", "HEAD", str(config), "--server-repo",
                                      str(repo), "--rounds", "4", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 1, result.output
    (record,) = [read_ab(p) for p in (tmp_path / "out").glob("ab-server-*.json")]
    (case,) = record.cases
    base, new = case.slo["base"], case.slo["new"]
    assert base.status == new.status == "found" and new.rate < base.rate
    assert case.verdict == "regression" and case.timing.change > 0  # + = worse
    assert "capacity at p90 <= 400 ms" in case.why
    assert [s.status for s in case.base + case.new] == ["ok"] * 8
    ready, firsts = case.cold_timing["launch to ready"], case.cold_timing["first request"]
    assert firsts.verdict == "regression" and firsts.change > 0
    assert ready.rounds == 4
    assert all(x.first_ms >= 400 for x in case.cold_start["new"].launches)

"""Servers under test launched by mibench (harness/under_test/launch.py): started on a free
loopback port per distinct launch and server arguments, recorded (command, log, startup),
stopped on every way out of a run: the end, a failed start, Ctrl-C, and kill -9 of
mibench itself (each server's reaper). CI launches `mibench serve`, which starts in a few
seconds; tests/test_sglang_jax.py launches the real sglang-jax when it is installed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

import pytest

from mibench.errors import MibenchError
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run

pytestmark = pytest.mark.slow  # every test here starts servers

HEAD = """name: launched
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 24, num_items: 4, item_tokens: 3, label_token_ids: [198, 9834],
           delimiter: 151643, apply_softmax: true, seed: 0}
runs: {timeout_s: 120}
"""
SERVE = ('["{python}", "-m", "mibench.harness.cli", "serve", "--model", "{model}", '
         '"--host", "{host}", "--port", "{port}", "--dtype", "{dtype}"]')


def write(tmp_path: Path, body: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def processes_with(marker: str) -> list[int]:
    """Pids whose command line holds `marker`."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(entry.name))
            except OSError:
                pass
    return [p for p in out if p != os.getpid()]


def wait_until(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_one_server_per_launch_and_arguments_recorded_and_stopped(tmp_path):
    marker = f"mibench-test-{uuid.uuid4().hex[:8]}"
    path = write(tmp_path, f"""
        cases:
          - engine: http
            mode: single
            launch:
              name: serve
              command: {SERVE}
              package: mibench
              env: {{MIBENCH_TEST_MARKER: {marker}}}
            server_args: {{mode: [packed, single], delimiter: 151643}}
            clients: [1, 2]
            requests: 4
        parity: {{checks: [engines, concurrency]}}
        """)
    cases = expand(load_config(path))
    assert [c.case_id for c in cases] == [
        f"http/single/server=serve/mode={m}/clients={n}/tp=1"
        for m in ("packed", "single") for n in (1, 2)]
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False))
    assert exit_code(record) == 0, [c.error for c in record.cases]
    servers = [c.server for c in record.cases]
    assert all(s is not None and s.startup_s > 0 for s in servers)
    assert servers[0].command == servers[1].command != servers[2].command  # one per arguments
    assert servers[0].command[-4:] == ["--mode", "packed", "--delimiter", "151643"]
    assert servers[0].args == {"mode": "packed", "delimiter": 151643}
    assert servers[0].env == {"MIBENCH_TEST_MARKER": marker}
    assert servers[0].reported.get("version")  # GET /get_server_info
    log = (tmp_path / "out" / servers[0].log)
    assert log.is_file() and "$ " in log.read_text()
    assert [c.params["server_args"]["mode"] for c in record.cases] == ["packed"] * 2 + \
        ["single"] * 2
    checks = {(c.check, c.case_id): c for c in record.parity.checks}
    assert {k[0] for k in checks} == {"engines", "concurrency"} and len(checks) == 4
    assert all(c.status == "passed" for c in checks.values())
    assert processes_with(marker) == []  # nothing left running
    # the artifact's server entry is plain JSON that a report can show: how it was launched
    (artifact,) = (tmp_path / "out").glob("*.json")
    server = json.loads(artifact.read_text())["cases"][0]["server"]
    assert server["package"] == "mibench" and server["package_version"]
    assert server["name"] == "serve" and server["command"][1:4] == ["-m", "mibench.harness.cli",
                                                                    "serve"]


def test_a_server_that_does_not_come_up_fails_its_cases_with_its_log(tmp_path):
    path = write(tmp_path, """
        cases:
          - engine: http
            mode: single
            launch:
              command: ["{python}", "-c", "import sys; print('boom at', sys.argv[1]);
                        sys.exit(3)", "{port}"]
            clients: 1
            requests: 2
          - {engine: jax, mode: single}
        """)
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False))
    http, jax = record.cases
    assert http.status == "failed" and "exited with code 3" in http.error.message
    assert "boom at" in http.error.message  # the log's last lines
    assert jax.status == "ok"  # the other cases still run


def test_not_ready_in_time_is_failed_and_killed(tmp_path):
    marker = f"mibench-sleeper-{uuid.uuid4().hex[:8]}"
    path = write(tmp_path, f"""
        cases:
          - engine: http
            mode: single
            launch:
              command: ["{{python}}", "-c", "import time; time.sleep(600)", "{{port}}", "{marker}"]
              ready: {{timeout_s: 2}}
              stop: {{grace_s: 1}}
            clients: 1
        """)
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False))
    assert record.cases[0].status == "failed"
    assert "not ready after 2 s" in record.cases[0].error.message
    assert processes_with(marker) == []


def test_an_unset_interpreter_variable_skips_the_case(tmp_path, monkeypatch):
    monkeypatch.delenv("MIBENCH_NO_SUCH_SERVER", raising=False)
    path = write(tmp_path, """
        cases:
          - engine: http
            mode: single
            launch: {python: $MIBENCH_NO_SUCH_SERVER, command: ["{python}", "{port}"]}
            clients: 1
        """)
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False))
    assert record.cases[0].status == "skipped"
    assert "MIBENCH_NO_SUCH_SERVER" in record.cases[0].error.message
    assert exit_code(record) == 0


HANGING_SERVER = """
import http.server, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b'{}')
    def do_POST(self):
        time.sleep(600)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def terminal_sigint() -> None:
    """Ctrl-C as from a terminal: a shell's background job (`.ci/run &`, nohup) ignores
    SIGINT, and the ignoring is inherited through exec, so a run of this test under it
    would send a SIGINT that mibench never sees."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_run(config: Path, out: Path) -> subprocess.Popen:
    """`mibench run CONFIG` as from a terminal (Ctrl-C reaches it), in a session of its
    own, its output piped."""
    return subprocess.Popen([sys.executable, "-m", "mibench.harness.cli", "run", str(config),
                             "--out", str(out), "--progress", "none"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=terminal_sigint)


def kill_leftovers(proc: subprocess.Popen, marker: str) -> None:
    """Whatever a failed test left running: mibench, and the server marked `marker`."""
    if proc.poll() is None:
        proc.kill()
    for pid in processes_with(marker):
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT", "SIGTERM"])
def test_no_server_outlives_a_killed_or_interrupted_mibench(tmp_path, how):
    """mibench stuck in a case against a server that never answers: kill -9 (the reaper
    stops the server), Ctrl-C or SIGTERM (a cancelled CI job: mibench stops it) leaves
    nothing running."""
    marker = f"mibench-hang-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "hang.py"
    script.write_text(HANGING_SERVER)
    path = write(tmp_path, f"""
        cases:
          - engine: http
            mode: single
            launch:
              command: ["{{python}}", "{script}", "{{port}}", "{marker}"]
              stop: {{grace_s: 2}}
            clients: 1
            timeout_s: 600
        """)
    proc = start_run(path, tmp_path / "out")
    try:
        (server,) = wait_until(lambda: processes_with(marker), 60, "the server")
        wait_until(lambda: list((tmp_path / "out").glob("*.json")), 30, "the artifact")
        time.sleep(1.0)  # the case's first request is in flight
        os.kill(proc.pid, getattr(signal, how))
        proc.wait(30)
        wait_until(lambda: not processes_with(marker), 20, "the server to stop")
    finally:
        kill_leftovers(proc, marker)
    if how != "SIGKILL":
        assert proc.returncode == 130
        err = proc.stderr.read().decode()
        (artifact,) = (tmp_path / "out").glob("*.json")  # named, with what it holds
        assert (f"interrupted: no case finished; {artifact} holds none" in err
                or f"interrupted: {artifact} holds 1 of 1 case(s)" in err), err
        assert f"resume with: mibench run {path} --resume {artifact}" in err


def answered(port: int) -> int:
    """How many requests the fake server on `port` has answered (0 before it is up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_server_info", timeout=5) as r:
            return json.loads(r.read())["answered"]
    except OSError:
        return 0


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM"])
def test_an_interrupted_capacity_search_keeps_the_steps_it_walked(tmp_path, how):
    """Ctrl-C or SIGTERM mid-search: the case is kept as failed (Interrupted) with the steps
    it finished, not lost with the process. The fake server answers in 20 ms one at a
    time; the first step (36 requests at 9/s) takes 4 s, the rest of the search (rates up
    to the server's 50/s, each step paced by the clock) about 10 s: the signal comes once
    the server has answered 40 requests (past the first step)."""
    marker = f"1.{uuid.uuid4().int % 10**8}"  # --first-ms: a unique command line, +1 ms
    path = write(tmp_path, f"""
        cases:
          - engine: http
            mode: single
            launch:
              name: fake
              command: ["{{python}}", "-m", "mibench.harness.testing.fake_server", "{{port}}",
                        "--serial-ms", "20", "--first-ms", "{marker}"]
              ready: {{path: /get_server_info, timeout_s: 60}}
              stop: {{grace_s: 2}}
            slo: {{p90_ms: 300, start_rate: 9, precision: 0.05, repeats: 3}}
        """)
    proc = start_run(path, tmp_path / "out")
    try:
        (server,) = wait_until(lambda: processes_with(marker), 60, "the server")
        port = (Path("/proc") / str(server) / "cmdline").read_bytes().split(b"\0")[3]
        wait_until(lambda: answered(int(port)) >= 40, 120, "the first step")
        os.kill(proc.pid, getattr(signal, how))
        _, err = proc.communicate(timeout=60)
        wait_until(lambda: not processes_with(marker), 20, "the server to stop")
    finally:
        kill_leftovers(proc, marker)
    assert proc.returncode == 130, err
    assert "keeping what the running case measured" in err.decode()
    (artifact,) = (tmp_path / "out").glob("*.json")
    (case,) = json.loads(artifact.read_text())["cases"]
    assert case["status"] == "failed" and case["error"]["type"] == "Interrupted", case["error"]
    steps = case["slo"]["steps"]
    assert steps and steps[0]["rate"] == 9 and steps[0]["sent"] == 36, steps
    assert case["slo"]["repeats"] == []  # stopped before the search ended


@pytest.mark.parametrize("case, key, words", [
    ('{engine: http, mode: single, clients: 1, base_url: "http://127.0.0.1:1", '
     'launch: {command: ["{port}"]}}', "cases.0.launch", "not both"),
    ('{engine: http, mode: single, clients: 1, base_url: "http://127.0.0.1:1", '
     'server_args: {x: 1}}', "cases.0.server_args", "give launch too"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["serve"]}}',
     "cases.0.launch.command", "{port}"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["{prot}"]}}',
     "cases.0.launch.command", "unknown placeholder {prot}"),
    ('{engine: jax, mode: single, launch: {command: ["{port}"]}}', "cases.0.launch",
     "key of http cases"),
    ('{engine: http, mode: single, clients: 1, launch: {command: ["{port}"], '
     'python: "$1x"}}', "cases.0.launch.python", "is not a variable"),
])
def test_bad_launch_is_one_error_naming_the_key(tmp_path, case, key, words):
    path = tmp_path / "c.yaml"
    path.write_text(HEAD + f"cases:\n  - {case}\n")
    with pytest.raises(MibenchError) as e:
        load_config(path)
    assert key in str(e.value) and words in str(e.value)


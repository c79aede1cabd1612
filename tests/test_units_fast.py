"""Fast unit tests of the parts the slow tier exercises end to end (the reaper of a
launched server, the concurrency check's arithmetic, the device probe's bootstrap, the
compiled-cost gate without compiling, the jobs' pure parts), so the fast tier runs every
source file and still proves something of each."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mibench.engines import ScoreResult

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True,
                          text=True).stdout.strip()[:1] not in ("Z", "")


def test_the_reaper_stops_the_whole_tree_when_mibench_goes_away(tmp_path):
    """The reaper starts the server, reads EOF (mibench closed its end, or died) and stops
    its whole tree: the server and a child that left its session (setsid)."""
    import json

    script = ("import subprocess, sys, time\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
              " start_new_session=True)\n"
              "print('CHILD', c.pid, flush=True)\ntime.sleep(60)\n")
    log = tmp_path / "server.log"
    reaper = subprocess.Popen([sys.executable, "-m", "mibench.harness.run.reaper"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              start_new_session=True)
    spec = {"command": [sys.executable, "-c", script], "env": dict(os.environ),
            "log": str(log), "signal": "SIGTERM", "grace_s": 1, "tmp": ""}
    reaper.stdin.write((json.dumps(spec) + "\n").encode())
    reaper.stdin.flush()
    server = json.loads(reaper.stdout.readline())["pid"]
    try:
        deadline = time.monotonic() + 20
        while "CHILD" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(log.read_text().split("CHILD ")[1].split()[0])
        assert _alive(server) and _alive(child)
        reaper.stdin.close()  # as when mibench is killed: the pipe's writer is gone
        reaper.wait(20)
        assert not _alive(server) and not _alive(child)
    finally:
        if reaper.poll() is None:
            reaper.kill()


def test_a_recycled_pid_is_never_signalled():
    """proctree signals a pid only while it is the process it was (same start time)."""
    from mibench.harness.host.proctree import _signal_all, start_time

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert start_time(other.pid) is not None
        _signal_all({other.pid: "1"}, signal.SIGKILL)  # another start time: not it
        time.sleep(0.3)
        assert other.poll() is None
        _signal_all({other.pid: start_time(other.pid)}, signal.SIGKILL)
        assert other.wait(10) == -signal.SIGKILL
    finally:
        if other.poll() is None:
            other.kill()


def test_moved_names_the_requests_and_items_largest_first():
    from mibench.harness.under_test.concurrency import moved

    alone = [np.full((3, 2), 0.5), np.full((2, 2), 0.25)]
    together = [a.copy() for a in alone]
    together[1][1, 0] = 0.25 * np.e  # request 1, item 1: |d log| 1
    together[0][2, 1] = 0.5 * 1.001  # request 0, item 2: 1e-3
    found = moved(alone, together, 1e-5)
    assert [(m.request, m.item) for m in found] == [(1, 1), (0, 2)]
    assert found[0].line() == "request 1 item 1: |d log| 1"
    assert moved(alone, [a.copy() for a in alone], 1e-5) == []


class CrowdedEngine:
    """An engine whose scores shift when another request is in flight: what the
    concurrency check must catch."""

    def __init__(self):
        self.in_flight, self.lock = 0, threading.Lock()

    def score(self, query, items, labels, mode="single", **kw):
        with self.lock:
            self.in_flight += 1
            crowded = self.in_flight > 1
        time.sleep(0.05)
        with self.lock:
            self.in_flight -= 1
        p = 0.4 if crowded else 0.5
        return ScoreResult(scores=[[p, 1 - p] for _ in items], mode=mode,
                           num_items=len(items), num_tokens=0)


def test_score_together_sends_every_request_at_once():
    from mibench.harness.under_test.concurrency import (
        moved,
        requests_of,
        score_alone,
        score_together,
    )
    from mibench.workloads import WorkloadSpec

    spec = WorkloadSpec(query_tokens=4, num_items=3, item_tokens=2, label_token_ids=(1, 2),
                        apply_softmax=True)
    reqs = requests_of(spec, 1000, frozenset(), 4, 0)
    others = requests_of(spec, 1000, frozenset(), 4, 4)
    assert len({tuple(r.query) for r in reqs + others}) == 8  # different requests
    engine = CrowdedEngine()
    alone = score_alone(engine, spec, reqs)
    together = score_together(engine, spec, reqs, others)
    found = moved(alone, together, 1e-5)
    # the first may start before any other is in flight; the rest were crowded
    assert {1, 2, 3} <= {m.request for m in found}


def test_the_worker_bootstrap_probes_a_checkout():
    ok = subprocess.run([sys.executable, "-m", "mibench.harness.run.bootstrap", "check",
                         str(ROOT)], capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr


def test_compiled_costs_compare_without_compiling(monkeypatch):
    """ab/costs.py: each JAX case compiled at both sides (here: canned records), the
    growth past the threshold a regression, torch cases left out."""
    import mibench.harness.ab.costs as costs
    from mibench.harness.records import CaseCompile, CompileCase

    def compiled(flops: float):
        def fake(cases, target, lib, engine_root="", on_case=lambda rec: None):
            return [CompileCase(case_id=c.case_id, engine="jax", mode=c.mode, params={},
                                model={"path": "embedded:tiny", "dtype": "float32"},
                                topology={"tp": 1}, workload={"label_token_ids": [1]},
                                status="ok",
                                started_at="t", compile=CaseCompile(
                                    programs=[], hbm_per_chip_bytes=1, compile_s=1.0,
                                    wall_s=1.0, flops_per_pass=flops, hbm_peak_bytes=10,
                                    fits=True)) for c in cases]
        return fake

    class Case:
        def __init__(self, case_id, engine):
            self.case_id, self.engine, self.mode = case_id, engine, "single"

    class Side:
        commit, root = "abc", "."

    class Target:
        name = "v6e-1"

    calls = iter([compiled(100.0), compiled(130.0)])
    monkeypatch.setattr(costs, "compile_cases", lambda *a, **k: next(calls)(*a, **k))
    checks = costs.compile_both([Case("jax/single", "jax"), Case("torch/single", "torch")],
                                Target(), None, {"base": Side(), "new": Side()}, 0.05,
                                lambda line: None)
    assert list(checks) == ["jax/single"]
    assert checks["jax/single"].regressions and "FLOPs" in checks["jax/single"].regressions[0]


def test_jobs_pure_parts():
    from mibench.engines.profile import _ms
    from mibench.harness.jobs import calibrate
    from mibench.harness.under_test.jobs import http_overhead

    query, items = http_overhead.request()
    assert len(query) == 64 and len(items) == 16 and {len(i) for i in items} == {6}
    assert http_overhead.request() == (query, items)  # the same request every time
    assert calibrate._cpu()
    ms, out = _ms(lambda: np.ones(3), 3)
    assert ms >= 0 and list(out) == [1.0, 1.0, 1.0]


# a server that leaves a file in its temporary folder (as sglang-jax leaves its ZMQ
# endpoints) and answers GET /health; it prints where the file is
LEAVES_A_FILE = """
import http.server, sys, tempfile
fd, path = tempfile.mkstemp(prefix="endpoint-")
print(path, flush=True)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
"""


def _left_file(log: Path) -> Path:
    return Path([line for line in log.read_text().splitlines()
                 if line.startswith("/") and "endpoint-" in line][0])


@pytest.mark.parametrize("how", ["stop", "reaper"])
def test_a_server_leaves_nothing_in_the_temporary_folder(tmp_path, how):
    """Each launched server gets a TMPDIR of its own, removed when it stops, or by its
    reaper when mibench is gone (the pipe closed without a stop)."""
    from mibench.harness.config.server import Launch, ReadyProbe, ServerLaunch, StopPolicy
    from mibench.harness.under_test.launch import Server

    launch = ServerLaunch(Launch(command=["{python}", "-c", LEAVES_A_FILE, "{port}"],
                                 ready=ReadyProbe(interval_s=0.1, timeout_s=30.0),
                                 stop=StopPolicy(grace_s=2.0)))
    server = Server(launch, model_folder="m", dtype="float32", log=tmp_path / "server.log")
    server.start()
    left = _left_file(tmp_path / "server.log")
    assert left.exists() and left.parent == Path(server.tmp)
    assert left.parent.name.startswith("mibench-server-")
    if how == "stop":
        server.stop()
    else:  # as when mibench is killed: only the reaper is left to clean up
        pid = server.proc.pid
        server.reaper.stdin.close()
        server.reaper.wait(20)
        assert not _alive(pid)
    assert not left.parent.exists()
    if how == "reaper":
        server.proc = server.reaper = None
        server.stop()

"""`mibench ab --server-repo` and `--base-python/--new-python`: two versions of a launched
server judged like two revisions of the engines (harness/under_test/ab.py). The server here is
a stdlib fake in a scratch git repository (one commit sleeps in its score path), so the
test is fast; the same machinery judges sglang-jax (docs/cli.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app

pytestmark = pytest.mark.slow  # starts servers

SERVER = r'''
import hashlib, http.server, json, math, sys, time
DELAY = 0.0
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def _send(self, code, data):  # one write: no Nagle / delayed-ACK stall
        body = json.dumps(data).encode()
        head = (f"HTTP/1.1 {code} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)
    def do_GET(self):
        self._send(200, {"version": "fake-1", "delay": DELAY})
    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        time.sleep(DELAY)
        rows = []
        for item in req["items"]:
            keys = [repr((req["query"], item, l)).encode() for l in req["label_token_ids"]]
            logits = [int(hashlib.sha256(k).hexdigest()[:6], 16) / 2**24 * 4 for k in keys]
            z = sum(math.exp(x) for x in logits)
            rows.append([math.exp(x) / z for x in logits])
        self._send(200, {"scores": rows, "object": "scoring"})
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''

CONFIG = """name: fake-server
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 16, num_items: 3, item_tokens: 2, label_token_ids: [10, 20],
           apply_softmax: true, seed: 0}
cases:
  - engine: http
    mode: single
    launch:
      name: fake
      command: ["{python}", "-m", "fakeserver", "{port}", "MARKER"]
      ready: {path: /get_server_info, timeout_s: 30}
      stop: {grace_s: 2}
      repo_path: "."
    clients: 1
    requests: 8
    warmup_requests: 1
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c",
                           "user.email=t@localhost", *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def marker(tmp_path) -> str:
    return f"mibench-ab-{tmp_path.name}"


def servers_running(tmp_path) -> list[int]:
    from test_launch import processes_with

    return processes_with(marker(tmp_path))


@pytest.fixture
def server_repo(tmp_path):
    """A scratch server repository: commit `fast`, then `slow` (20 ms more per request)."""
    repo = tmp_path / "server"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "fakeserver.py").write_text(SERVER)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fast")
    (repo / "fakeserver.py").write_text(SERVER.replace("DELAY = 0.0", "DELAY = 0.02"))
    git(repo, "commit", "-qam", "slow: sleeps in the score path")
    return repo


def ab(tmp_path, *args) -> tuple[int, str]:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG.replace("MARKER", marker(tmp_path)))
    result = CliRunner().invoke(app, ["ab", *args[:2], str(config), "--out",
                                      str(tmp_path / "out"), *args[2:]])
    return result.exit_code, result.output


def test_a_slower_server_revision_is_a_regression_and_a_a_is_not(tmp_path, server_repo,
                                                                   monkeypatch):
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    # 5 rounds: at 3 (2 degrees of freedom, alpha 0.01) a base of ~1 ms jittering 4x left a
    # 17x slowdown at p=0.021 in a clean-clone CI run
    code, out = ab(tmp_path, "HEAD~1", "HEAD", "--server-repo", str(server_repo),
                   "--rounds", "5")
    assert code == 1, out
    assert "regression" in out, out
    code, out = ab(tmp_path, "HEAD~1", "HEAD~1", "--server-repo", str(server_repo),
                   "--rounds", "3")
    assert code == 0, out
    assert servers_running(tmp_path) == []  # both sides' servers stopped after each A/B
    from mibench.harness.records import read_ab

    (record,) = [r for r in map(read_ab, (tmp_path / "out").glob("ab-server-*.json"))
                 if r.base.commit != r.new.commit]
    (case,) = record.cases
    assert record.pacing == "calls" and case.verdict == "regression"
    assert case.timing.change > 1.0  # +20 ms on a request of a few ms
    assert case.scores is not None and not case.scores.moved  # same scores on both sides
    assert set(case.servers) == {"base", "new"}
    assert case.servers["new"].reported["delay"] == 0.02
    assert case.servers["new"].source["commit"] == git(server_repo, "rev-parse", "HEAD")


def test_two_interpreters_and_bad_sides_are_one_line(tmp_path, server_repo):
    code, out = ab(tmp_path, "a", "b", "--base-python", sys.executable)
    assert code == 2 and "--new-python" in out
    code, out = ab(tmp_path, "a", "b", "--server-repo", str(tmp_path))
    assert code == 2 and "not a git checkout" in out


def test_two_interpreters_a_a(tmp_path, server_repo):
    config = textwrap.dedent(CONFIG).replace('repo_path: "."', f"cwd: {server_repo}")
    config = config.replace("MARKER", marker(tmp_path))
    (tmp_path / "c.yaml").write_text(config)
    result = CliRunner().invoke(app, ["ab", "old", "new", str(tmp_path / "c.yaml"), "--out",
                                      str(tmp_path / "out"), "--rounds", "3",
                                      "--base-python", sys.executable,
                                      "--new-python", sys.executable])
    assert result.exit_code == 0, result.output


def test_a_new_revision_whose_server_cannot_start_is_a_regression(tmp_path, server_repo,
                                                                   monkeypatch):
    """Exit 1 (docs/cli.md: a case the new revision fails), naming why; the other way
    round, a base that cannot start leaves nothing compared: exit 2. Before: exit 2 for
    both, as if the input were bad."""
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    (server_repo / "fakeserver.py").write_text("import sys\nprint('broken build')\n"
                                               "sys.exit(3)\n")
    git(server_repo, "commit", "-qam", "broken: exits at start")
    code, out = ab(tmp_path, "HEAD~2", "HEAD", "--server-repo", str(server_repo),
                   "--rounds", "3")
    assert code == 1, out
    assert "regression" in out and "did not start" in out, out
    code, out = ab(tmp_path, "HEAD", "HEAD~2", "--server-repo", str(server_repo),
                   "--rounds", "3")
    assert code == 2, out
    assert servers_running(tmp_path) == []

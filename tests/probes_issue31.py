"""The probes of issue 31, measured on any checkout of mibench (before and after): run
`python tests/probes_issue31.py --python CHECKOUT/.venv/bin/python --cwd CHECKOUT` and it
prints one line per probe. Only the command line, sockets and files are used (plus, for
bisect, its Python function), so the same script measures an older checkout; every probe
is capped, so a hang shows as `>CAP s`. About 6 minutes on a 2-core machine after, longer
before (the caps). Not a test: tests/test_*.py assert the same behaviours."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

P: argparse.Namespace
TMP = Path(tempfile.mkdtemp(prefix="probes31-"))
MiB = 1024**2


def env() -> dict:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "MIBENCH_CACHE": os.environ.get("MIBENCH_CACHE", str(Path.home() / ".cache/mibench"))}


# runs a command and says the largest resident set of it and every process below it that
# ended (RUSAGE_CHILDREN), optionally under an address-space limit (bytes)
WRAP = ("import resource, subprocess, sys\n"
        "limit = int(sys.argv[1])\n"
        "pre = (lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit))) if limit "
        "else None\n"
        "code = subprocess.call(sys.argv[2:], preexec_fn=pre)\n"
        "print('MAXRSS', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
        "file=sys.stderr)\nsys.exit(code)\n")


def mibench(*args, cap: float = 120, limit_as: int = 0) -> tuple[int | str, str, float, int]:
    """(exit code or 'hung', stderr's last line, seconds, peak RSS in KiB of the command
    and what it started)."""
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", WRAP, str(limit_as), P.python, "-m",
                             "mibench.harness.cli", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=P.cwd,
                            env=env(), start_new_session=True)
    try:
        _, err = proc.communicate(timeout=cap)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        code = "hung"
    took = time.monotonic() - t0
    lines = err.decode(errors="replace").strip().splitlines()
    rss = next((int(x.split()[1]) for x in lines if x.startswith("MAXRSS ")), 0)
    lines = [x for x in lines if not x.startswith("MAXRSS ")]
    return code, (lines[-1] if lines else "")[:300], took, rss


def config(name: str, text: str) -> Path:
    path = TMP / f"{name}.yaml"
    path.write_text(text)
    return path


HEAD = """name: {name}
model: {{path: "embedded:tiny"}}
workload: {{query_tokens: {q}, num_items: {n}, item_tokens: {i}, label_token_ids: [198]}}
runs: {{timeout_s: {t}}}
cases:
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(*flags):
    port = free_port()
    proc = subprocess.Popen([P.python, "-m", "mibench.harness.cli", "serve", "--model",
                             "embedded:tiny", "--port", str(port), *flags], cwd=P.cwd,
                            env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = ("127.0.0.1", port)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(url, 1):
            break
        time.sleep(0.3)
    try:
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def post(url, body: bytes, cap: float) -> tuple[str, float]:
    """(status line, seconds) of one POST /v1/score, or ('no answer', cap)."""
    t0 = time.monotonic()
    try:
        with socket.create_connection(url, cap) as s:
            s.settimeout(cap)
            s.sendall(b"POST /v1/score HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                      b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
                if time.monotonic() - t0 > cap:
                    break
        return data.split(b"\r\n", 1)[0].decode(errors="replace"), time.monotonic() - t0
    except OSError as e:
        return f"no answer ({type(e).__name__})", time.monotonic() - t0


SMALL = json.dumps({"query": [1, 2, 3], "items": [[4], [5]], "label_token_ids": [6]}).encode()


def held_sockets() -> str:
    with serve("--max-connections", "6", "--header-timeout", "2", "--body-timeout", "2",
               "--keep-alive", "1") as url:
        stop = threading.Event()

        def hold():
            while not stop.is_set():
                try:
                    with socket.create_connection(url, 5) as s:
                        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
                        s.settimeout(5)
                        s.recv(65536)
                        s.sendall(b"x")
                        s.settimeout(0.5)
                        while not stop.is_set():
                            with contextlib.suppress(TimeoutError):
                                if not s.recv(65536):
                                    break
                except OSError:
                    time.sleep(0.05)

        post(url, SMALL, 120)  # the first request of a shape compiles it
        alone = post(url, SMALL, 60)[1]
        threads = [threading.Thread(target=hold, daemon=True) for _ in range(6)]
        for t in threads:
            t.start()
        time.sleep(5)
        got = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            status, took = post(url, SMALL, 10)
            got.append(status)
            if " 200 " in status:
                break
            time.sleep(1)
        stop.set()
    result = f"answered 200 in {took:.2f} s (alone {alone:.2f} s)" if " 200 " in got[-1] \
        else "never answered 200 in 30 s"
    return (f"held sockets (6 on --max-connections 6): a well-formed request {result} "
            f"({len(got)} tries; first answer {got[0]!r})")


def flood() -> str:
    big = json.dumps({"query": "a " * int(3.8 * MiB), "items": ["b"],
                      "label_token_ids": [6]}).encode()
    with serve() as url:
        post(url, SMALL, 60)
        alone = post(url, SMALL, 60)[1]
        results = []
        threads = [threading.Thread(target=lambda: results.append(post(url, big, 300)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        status, small = post(url, SMALL, 300)
        for t in threads:
            t.join(300)
    bigs = ", ".join(f"{s.split(' ', 1)[1] if ' ' in s else s} {t:.1f} s" for s, t in results)
    return (f"flood of 4 x 7.6 MiB text bodies: small request {small:.2f} s ({status}), "
            f"alone {alone:.3f} s; the big ones: {bigs}")


DRIP = r"""
import socket, sys, threading, time
s = socket.create_server(("127.0.0.1", int(sys.argv[1])))
def drip(c):
    try:
        c.recv(65536)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
        while True:
            c.sendall(b" "); time.sleep(1.0)
    except OSError:
        pass
while True:
    c, _ = s.accept()
    threading.Thread(target=drip, args=(c,), daemon=True).start()
"""


def dripping() -> list[str]:
    (TMP / "drip.py").write_text(DRIP)
    ready = config("ready", HEAD.format(name="ready", q=8, n=2, i=2, t=60) + f"""
  - engine: http
    mode: single
    clients: 1
    requests: 2
    launch: {{command: ["{{python}}", "{TMP / 'drip.py'}", "{{port}}"], ready: {{timeout_s: 4}},
              stop: {{grace_s: 1}}}}
""")
    code, line, took, _ = mibench("run", ready, "--out", TMP / "o-ready", "--progress", "none",
                                  cap=200)
    out = [f"dripping /health, ready.timeout_s 4: run ended after {took:.1f} s (exit {code})"]
    port = free_port()
    server = subprocess.Popen([sys.executable, str(TMP / "drip.py"), str(port)])
    try:
        card = config("card", HEAD.format(name="card", q=8, n=2, i=2, t=60) + f"""
  - {{engine: http, mode: single, base_url: "http://127.0.0.1:{port}", clients: 1,
      requests: 2, timeout_s: 3}}
""")
        code, line, took, _ = mibench("run", card, "--out", TMP / "o-card", "--progress",
                                      "none", cap=300)
        out.append(f"dripping /v1/models and /v1/score, timeout_s 3, runs.timeout_s 60: run "
                   f"ended after {took:.1f} s (exit {code})")
    finally:
        server.kill()
    return out


CANNED = r"""
import http.server, json, sys
answer = json.dumps({"scores": [[0.5]] * int(sys.argv[2]), "object": "scoring"}).encode()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Length", str(len(answer)))
        self.end_headers(); self.wfile.write(answer)
    def do_GET(self):
        self.send_response(404); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
s.daemon_threads = True
s.serve_forever()
"""


def http_memory() -> str:
    (TMP / "canned.py").write_text(CANNED)
    port, items = free_port(), 100
    server = subprocess.Popen([sys.executable, str(TMP / "canned.py"), str(port), str(items)])
    out = []
    try:
        time.sleep(1)
        for n in (1_000, 10_000):
            cfg = config(f"mem{n}", HEAD.format(name=f"mem{n}", q=2000, n=items, i=20, t=3600)
                         + f"""  - {{engine: http, mode: single, base_url: "http://127.0.0.1:{port}",
      clients: 4, requests: {n}, timeout_s: 60}}
""")
            code, line, took, rss = mibench("run", cfg, "--out", TMP / f"o-mem{n}",
                                            "--progress", "none", cap=1800)
            out.append(f"{n} requests: peak RSS {rss / 1024:.0f} MiB ({took:.0f} s, exit {code})")
    finally:
        server.kill()
    return ("http case at query 2000 + 100 items x 20, 4 clients, against canned answers "
            "(peak RSS of mibench and its workers): " + "; ".join(out))


TREE = r"""
import http.server, subprocess, sys
c = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "PROBE31-SETSID"],
                     start_new_session=True)
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers()
    def do_POST(self):
        import time; time.sleep(600)
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def survivors() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError):
            if entry.name.isdigit() and b"PROBE31-SETSID" in (entry / "cmdline").read_bytes():
                out.append(int(entry.name))
    return out


def setsid_child() -> list[str]:
    (TMP / "tree.py").write_text(TREE)
    cfg = config("tree", HEAD.format(name="tree", q=8, n=2, i=2, t=5) + f"""
  - engine: http
    mode: single
    clients: 1
    requests: 1
    timeout_s: 3
    launch: {{command: ["{{python}}", "{TMP / 'tree.py'}", "{{port}}"], stop: {{grace_s: 1}}}}
""")
    lines = []
    code, _, took, _ = mibench("run", cfg, "--out", TMP / "o-tree", "--progress", "none", cap=120)
    time.sleep(2)
    left = survivors()
    lines.append(f"setsid child after the run ended: {len(left)} left running")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    proc = subprocess.Popen([P.python, "-m", "mibench.harness.cli", "run", str(cfg), "--out",
                             str(TMP / "o-tree9"), "--progress", "none"], cwd=P.cwd, env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not survivors() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    proc.kill()
    proc.wait()
    time.sleep(5)
    left = survivors()
    lines.append(f"setsid child 5 s after kill -9 of mibench: {len(left)} left running")
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return lines


def big_log() -> str:
    script = TMP / "noisy.py"
    script.write_text("import sys\nchunk = 'x' * 1048575 + '\\n'\nfor _ in range(400):\n"
                      "    sys.stdout.write(chunk)\nsys.stdout.flush()\nsys.exit(3)\n")
    cfg = config("log", HEAD.format(name="log", q=8, n=2, i=2, t=60) + f"""
  - engine: http
    mode: single
    clients: 1
    launch: {{command: ["{{python}}", "{script}", "{{port}}"], ready: {{timeout_s: 120}}}}
""")
    code, _, took, rss = mibench("run", cfg, "--out", TMP / "o-log", "--progress", "none",
                                 cap=600)
    return (f"a server that writes a 400 MB log and exits: peak RSS {rss / 1024:.0f} MiB "
            f"(exit {code}, {took:.0f} s)")


def readers() -> list[str]:
    fifo = TMP / "fifo.json"
    os.mkfifo(fifo)
    out = []
    for what in (fifo, Path("/dev/zero")):
        for cmd in (["report"], ["export"]):
            code, line, took, rss = mibench(*cmd, what, cap=30, limit_as=3 * 1024**3)
            out.append(f"{cmd[0]} {what.name} (3 GiB address-space limit): exit {code} after "
                       f"{took:.1f} s, peak RSS {rss / 1024:.0f} MiB: {line[:90]}")
    return out


def csv_injection() -> str:
    src = Path(__file__).parent / "data/reports/new.json"
    data = json.loads(src.read_text())
    data["provenance"]["git"]["branch"] = "@SUM(1+1)"
    path = TMP / "branch.json"
    path.write_text(json.dumps(data))
    proc = subprocess.run([P.python, "-m", "mibench.harness.cli", "export", str(path),
                           "--format", "csv"], capture_output=True, text=True, cwd=P.cwd,
                          env=env())
    import csv
    import io
    row = next(csv.DictReader(io.StringIO(proc.stdout)))
    return f"CSV branch cell: {row['branch']!r}"


def full_disk() -> str:
    folder = TMP / "full"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)]).returncode:
        return "full disk: cannot mount a tmpfs here"
    try:
        src = json.loads((Path(__file__).parent / "data/reports/new.json").read_text())
        src["cases"] = [{**c, "case_id": f"{c['case_id']}/copy={k}"} for k in range(40)
                        for c in src["cases"]]
        (TMP / "many.json").write_text(json.dumps(src))
        code, line, _, _ = mibench("export", TMP / "many.json", "--format", "csv", "--out",
                                   folder / "cases.csv", cap=60)
        left = {p.name: p.stat().st_size for p in folder.iterdir()}
        return f"export on a 64 KiB tmpfs: exit {code}, left {left}, {line[:120]!r}"
    finally:
        subprocess.run(["umount", str(folder)])


def validate_values() -> list[str]:
    out = []
    for name, case in {
        "env name with '='": '{engine: http, mode: single, clients: 1, launch: {command: '
                             '["{python}", "{port}"], env: {"A=B": "1"}}}',
        "{port:s}": '{engine: http, mode: single, clients: 1, launch: {command: ["{python}", '
                    '"{port:s}"]}}',
        "rate 1e-300": '{engine: http, mode: single, base_url: "http://127.0.0.1:1", '
                       'rate: 1.0e-300}',
        "labels [198, 198]": '{engine: http, mode: single, base_url: "http://127.0.0.1:1", '
                             'clients: 1, workload: {label_token_ids: [198, 198]}}',
    }.items():
        cfg = config("v", HEAD.format(name="v", q=8, n=2, i=2, t=60) + f"  - {case}\n")
        code, line, _, _ = mibench("validate", cfg, cap=60)
        out.append(f"validate {name}: exit {code} {line[:100]!r}")
    return out


BISECT = r"""
import json, subprocess, sys, tempfile, types
from pathlib import Path
from mibench.harness.ab import bisect as b
from mibench.harness.ab.rounds import judge
from mibench.harness.records.ab import ABCase, RoundSample
from mibench.harness.stats import paired
from mibench.harness.config import load_config
repo = Path(tempfile.mkdtemp()); git = lambda *a: subprocess.run(["git", "-C", str(repo), "-c",
    "user.name=p", "-c", "user.email=p@x", *a], check=True, capture_output=True, text=True).stdout
git("init", "-q"); shas = []
for i in range(7):
    git("commit", "-q", "--allow-empty", "-m", f"c{i}")
    shas.append(git("rev-parse", "HEAD").strip())
SAME, SLOW = [1.0, 1.01, 0.99] * 20, [2.0, 2.1, 1.9] * 20
ISSUE = [4.43, 11.43, 29.5]  # +1043% [-95%, +261254%] at 3 rounds, as in the issue
SCENARIOS = {"the first slow commit (3) measured wide at first": ISSUE + SLOW,
             "commit 3 wide at any number of rounds (mean ~0)": ISSUE + [0.05, 20.0] * 30}
ratios = None
def fake(config, repo_, good, sha, cache, *, rounds, case_glob, note, **kw):
    c = ABCase(case_id="jax/single/tp=1", engine="jax", mode="single", params={}, model="m",
               dtype="float32", tp=1, workload={"label_token_ids": [198]})
    for r, x in enumerate(ratios[shas.index(sha)][:rounds]):
        c.base.append(RoundSample(round=r, first=True, status="ok", timed_s=[1.0]))
        c.new.append(RoundSample(round=r, first=False, status="ok", timed_s=[x]))
    judge(c, {}, paired.ALPHA, paired.MIN_EFFECT, True)
    verdict = "regression" if c.verdict == "regression" else "no regression"
    return types.SimpleNamespace(cases=[c], verdict=verdict), None
b.run_ab = fake
cfg = Path(tempfile.mkdtemp()) / "c.yaml"
cfg.write_text(sys.argv[1])
for name, third in SCENARIOS.items():
    ratios = [SAME] * 3 + [third] + [SLOW] * 3
    try:
        found = b.bisect(load_config(cfg), repo, shas[0], shas[-1], repo / "cache",
                         case_glob=["jax/*"], rounds=3, note=lambda line: None)
        named = found.get("first_bad")
        said = f"names commit {shas.index(named)}" if named in shas else \
            f"names no commit ({found.get('verdict')})"
        steps = ", ".join(f"{shas.index(s['commit'])}:{s['verdict']}"
                          f"{'/' + str(s['rounds']) if 'rounds' in s else ''}"
                          for s in found["steps"])
        print(f"{name}: {said} (steps {steps})")
    except Exception as e:
        print(f"{name}: {type(e).__name__}: {str(e)[:200]}")
"""


def bisect_wide() -> str:
    text = HEAD.format(name="b", q=8, n=2, i=2, t=60) + "  - {engine: jax, mode: single}\n"
    proc = subprocess.run([P.python, "-c", BISECT, text], capture_output=True, text=True,
                          cwd=P.cwd, env=env(), timeout=300)
    return "bisect over a wide interval: " + (proc.stdout.strip() or proc.stderr.strip()[-300:])


PROBES = {"bisect": bisect_wide, "csv": csv_injection, "validate": validate_values,
          "readers": readers, "full-disk": full_disk, "held": held_sockets,
          "drip": dripping, "flood": flood, "setsid": setsid_child, "log": big_log,
          "memory": http_memory}


def main() -> None:
    global P
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--cwd", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--only", nargs="*", default=list(PROBES))
    P = parser.parse_args()
    for name in P.only:
        t0 = time.monotonic()
        try:
            result = PROBES[name]()
        except Exception as e:  # noqa: BLE001 - a probe that breaks is a figure too
            result = f"probe failed: {type(e).__name__}: {e}"
        for line in result if isinstance(result, list) else [result]:
            print(f"[{name}] {line}", flush=True)
        print(f"[{name}] ({time.monotonic() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()

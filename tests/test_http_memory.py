"""`engine: http` builds its request bodies as it sends them: a case's memory is flat in
`requests:` (what grows is one record per request), measured from 300 to 1,500
requests (issue 31's hand-run probes went to 10,000) against a server that answers canned
scores; `mibench validate` counts the client side in a case's memory."""

from __future__ import annotations

import gc
import http.server
import json
import threading
import tracemalloc

import pytest

from mibench.harness.config import ConfigError, load_config
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import fixed_peak, write_config
from mibench.harness.under_test.client_sizes import AHEAD, RECORD_BYTES, client_bytes

QUERY, ITEMS, ITEM = 200, 20, 10  # ~2.8 KB bodies, ~16 KB of workload per request


class CannedServer:
    """A `/v1/score` server that reads each body and answers the same scores (`items`
    rows of one label), on 127.0.0.1 in a thread: `with CannedServer(items) as url:`."""

    def __init__(self, items: int):
        answer = json.dumps({"scores": [[0.5]] * items, "object": "scoring"}).encode()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self):
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True

    def __enter__(self) -> str:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def http_config(tmp_path, url: str, requests: int, clients: int = 4):
    return load_config(write_config(tmp_path, f"""
        name: mem
        model: {{path: "embedded:tiny"}}
        workload: {{query_tokens: {QUERY}, num_items: {ITEMS}, item_tokens: {ITEM},
                   label_token_ids: [198]}}
        cases:
          - {{engine: http, mode: single, base_url: "{url}", clients: {clients},
              requests: {requests}, timeout_s: 30}}
        """, name=f"c{requests}.yaml"))


def peak_of_run(tmp_path, url: str, requests: int) -> int:
    """The peak of Python's allocations (tracemalloc, every thread) over a whole run."""
    config = http_config(tmp_path, url, requests)
    gc.collect()
    tracemalloc.start()
    try:
        record = run(plan_of(config, out=tmp_path / f"out{requests}", progress=False,
                             peak=fixed_peak()))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    (case,) = record.cases
    assert case.status == "ok" and case.http.ok == requests, case.error
    return peak


@pytest.mark.slow
def test_memory_is_flat_from_300_to_1500_requests(tmp_path):
    """Before: every body and every request's workload were built first (~16 KB a request
    at this shape, ~0.57 MB at the seeds'): 10k requests held ~150 MB more than 1k. Now
    what grows is the records, under 3 KB a request (~2.2 KB measured here, ~2.5 KB from
    500 to 3k: 1,200 more requests tell the two apart as well as 2,500, in half the time)."""
    with CannedServer(ITEMS) as url:
        small = peak_of_run(tmp_path, url, 300)
        large = peak_of_run(tmp_path, url, 1_500)
    per_request = (large - small) / 1_200
    print(f"http case peak (tracemalloc): 300 requests {small / 2**20:.1f} MiB, 1.5k "
          f"{large / 2**20:.1f} MiB: {per_request:.0f} bytes per extra request")
    assert per_request < 3 * 1024, per_request


def test_validate_counts_the_client_side(tmp_path):
    """The client's parts are in the estimate; a load whose in-flight bodies cannot fit is
    refused naming them (a 40k-item workload, 1000 clients: ~190 GiB of bodies)."""
    parts = client_bytes(requests=100_000, in_flight=4, tokens=12_000, items=500)
    assert parts["request records (client)"] == 100_000 * (RECORD_BYTES + 8)
    assert parts["request bodies (client)"] >= (4 + AHEAD) * 12_000 * 7
    path = write_config(tmp_path, """
        name: big
        model: {path: "embedded:tiny"}
        workload: {query_tokens: 2000, num_items: 40000, item_tokens: 600,
                   label_token_ids: [198]}
        cases:
          - {engine: http, mode: single, base_url: "http://127.0.0.1:1", clients: 1000,
             requests: 1000}
        """)
    with pytest.raises(ConfigError, match=r"request bodies \(client\)"):
        load_config(path)

"""A small scoring server (http.server; a Typer command line) speaking SGLang's
`POST /v1/score` (and `GET /health`, `GET /get_server_info`), for the tests and negative
controls of servers under test (not a benchmark subject). Scores are a hash of the
request's tokens (softmax over the labels), so a request's scores are its own alone.

    python -m mibench.harness.testing.fake_server PORT [--serial-ms S] [--inflight-shift X]
                                               [--first-ms F] [--warm-shift W] [--cache-off]

--serial-ms S      one request at a time, each S ms (a server of capacity 1000 / S req/s)
--inflight-shift X the first label's logit moves by X per other request in flight: scores
                   that depend on what else the server is doing (the `concurrency` check's
                   negative control)
--first-ms F       the first request after start takes F ms more (a cold start)
--warm-shift W     a "prefix cache": a request whose query was answered before (its prefix
                   warm) has its first label's logit moved by W: warm answers that differ
                   from cold ones (the `prefix_cache` check's negative control)
--cache-off        that cache off: --warm-shift moves nothing (the check's control server)
"""

from __future__ import annotations

import hashlib
import http.server
import json
import math
import threading
import time
import types

ARGS = None
LOCK = threading.Lock()
STATE = {"in_flight": 0, "answered": 0, "seen": set()}
SERIAL = threading.Lock()


def scores(req, others, warm=False):
    rows = []
    for item in req["items"]:
        keys = [repr((req["query"], item, lab)).encode() for lab in req["label_token_ids"]]
        logits = [int(hashlib.sha256(k).hexdigest()[:6], 16) / 2**24 * 4 for k in keys]
        logits[0] += ARGS.inflight_shift * others + (ARGS.warm_shift if warm else 0.0)
        z = sum(math.exp(x) for x in logits)
        rows.append([math.exp(x) / z for x in logits])
    return rows


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _send(self, code, data):
        body = json.dumps(data).encode()
        head = (f"HTTP/1.1 {code} OK\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.wfile.write(head + body)

    def do_GET(self):
        with LOCK:
            answered = STATE["answered"]
        self._send(200, {"version": "fake-score-server", "args": vars(ARGS),
                         "answered": answered})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with LOCK:
            STATE["in_flight"] += 1
            first = STATE["answered"] == 0
        try:
            if first and ARGS.first_ms:
                time.sleep(ARGS.first_ms / 1000)
            if ARGS.serial_ms:
                with SERIAL:
                    time.sleep(ARGS.serial_ms / 1000)
            elif ARGS.inflight_shift:
                time.sleep(0.05)  # long enough for the others sent with it to arrive
            with LOCK:
                others = STATE["in_flight"] - 1
                prefix = repr(req["query"])
                warm = prefix in STATE["seen"] and not ARGS.cache_off
                STATE["seen"].add(prefix)
            rows = scores(req, others, warm)
        finally:
            with LOCK:
                STATE["in_flight"] -= 1
                STATE["answered"] += 1
        self._send(200, {"scores": rows, "object": "scoring"})

    def log_message(self, *a):
        pass


def main(port: int, serial_ms: float = 0.0, inflight_shift: float = 0.0,
         first_ms: float = 0.0, warm_shift: float = 0.0, cache_off: bool = False) -> None:
    """Serve on 127.0.0.1:PORT until killed (the module docstring's flags)."""
    global ARGS
    ARGS = types.SimpleNamespace(port=port, serial_ms=serial_ms,
                                 inflight_shift=inflight_shift, first_ms=first_ms,
                                 warm_shift=warm_shift, cache_off=cache_off)
    http.server.ThreadingHTTPServer.request_queue_size = 256  # 16 connect at once (default 5)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    import typer

    typer.run(main)

"""A misbehaving `/v1/score` server against the http engine and the load generator: NaN,
Infinity, negative or out-of-range scores, softmax rows that do not sum to 1, the wrong
shape, a delimiter reported as a string, and answers too large to read. Every one is an
error naming the item (the engine) or a failed case naming the request and the item (a
run), never an `ok` case; an oversized answer is refused without being read whole."""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from mibench.engines import HttpClient, InvalidScores, MibenchError, load_engine, wire
from mibench.harness.config import load_config
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run
from mibench.harness.testing import fixed_peak, write_config

# every test here starts a misbehaving server: not the fast tier (tests/conftest.py)
pytestmark = pytest.mark.slow

DELIM = 151643
LABELS = [198, 9834]


class Misbehaving:
    """A stdlib HTTP/1.1 server on 127.0.0.1 (a free port) in a thread: every POST is
    answered by `answer(body) -> (status, headers, chunks)`, GET /v1/models by `models`
    (None: 404); it counts the bytes it wrote and stops on leaving the `with`."""

    def __init__(self, answer, models: dict | None = None):
        self.answer, self.models, self.sent = answer, models, 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if outer.models is None:
                    self.reply(404, {}, [b"{}"])
                else:
                    self.reply(200, {}, [json.dumps(outer.models).encode()])

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.reply(*outer.answer(body))

            def reply(self, status, headers, chunks):
                self.send_response(status)
                headers = {"Content-Type": "application/json", **headers}
                if "Content-Length" not in headers:
                    headers["Transfer-Encoding"] = "chunked"
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                chunked = headers.get("Transfer-Encoding") == "chunked"
                try:
                    for chunk in chunks:
                        data = b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk
                        self.wfile.write(data)
                        outer.sent += len(chunk)
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client stopped reading: fine

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Misbehaving:
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


def rows(*row, others=(0.25, 0.5)):
    """An answer whose scores are `row` for the last item and `others` for the rest."""
    def answer(body):
        n = len(body["items"])
        scores = [list(row)] + [list(others)] * (n - 1)
        # json.dumps writes NaN and Infinity bare, as a careless server would
        return 200, {}, [json.dumps({"scores": scores[::-1], "object": "scoring"}).encode()]
    return answer


@pytest.mark.parametrize("answer,needle", [
    (rows(float("nan"), 0.5), "item 2: score 0 is nan, not a finite probability"),
    (rows(0.5, float("inf")), "item 2: score 1 is inf, not a finite probability"),
    (rows(-0.1, 0.5), "item 2: score 0 is -0.1, not a probability in [0, 1]"),
    (rows(0.5, 1.5), "item 2: score 1 is 1.5, not a probability in [0, 1]"),
    (rows(0.7, 0.6), "item 2: label probabilities sum to 1.2999"),
    (rows(0.5, "0.5"), "item 2: score 1 is '0.5', not a number"),
    (rows(0.5), "item 2: expected 2 score(s), got [0.5]"),
    (lambda body: (200, {}, [b'{"scores": [[0.1, 0.2]]}']), "expected scores for 3 item(s)"),
])
def test_the_http_engine_refuses_wrong_scores_naming_the_item(answer, needle):
    with Misbehaving(answer) as fake:
        engine = load_engine("http", model="embedded:tiny", base_url=fake.url)
        with pytest.raises(InvalidScores) as e:  # a MibenchError: one line from the CLI
            engine.score([1, 2, 3], [[4], [5], [6]], LABELS, delimiter=DELIM)
    assert e.value.field == "base_url" and "answered 200, but" in str(e.value)
    assert needle in str(e.value), str(e.value)


def test_softmax_rows_must_sum_to_one_within_the_dtypes_tolerance():
    off = rows(0.5, 0.49, others=(0.25, 0.75))  # item 2 sums to 0.99: off by 1e-2
    with Misbehaving(off) as fake:
        f32 = load_engine("http", model="embedded:tiny", base_url=fake.url)
        with pytest.raises(MibenchError, match="item 2: softmax scores sum to 0.99"):
            f32.score([1, 2], [[4], [5], [6]], LABELS, delimiter=DELIM, apply_softmax=True)
        assert f32.score([1, 2], [[4], [5], [6]], LABELS, delimiter=DELIM).scores[2] == \
            [0.5, 0.49]  # without softmax a row may sum below 1
        bf16 = load_engine("http", model="embedded:tiny", dtype="bfloat16", base_url=fake.url)
        got = bf16.score([1, 2], [[4], [5], [6]], LABELS, delimiter=DELIM, apply_softmax=True)
        assert got.scores[2] == [0.5, 0.49]  # within bfloat16's 2e-2


def test_a_delimiter_reported_as_a_string_says_the_types_differ():
    facts = {"object": "list", "data": [{"id": "embedded:tiny", "mibench": {
        "delimiter": str(DELIM), "semantics": "delimited", "dtype": "float32"}}]}
    with Misbehaving(rows(0.1, 0.2), models=facts) as fake:
        engine = load_engine("http", model="embedded:tiny", base_url=fake.url)
        with pytest.raises(MibenchError) as e:
            engine.score([1, 2], [[4]], LABELS, delimiter=DELIM)
    message = str(e.value)
    assert "as a string (\"151643\"), not as the token id 151643: the types differ" in message
    assert "151643 vs 151643" not in message and e.value.field == "delimiter"


def stream(total: int, chunk: int = 1 << 20):
    """`total` bytes of a JSON-looking answer, made as they are sent (never held)."""
    yield b'{"scores": [' + b" " * (chunk - 12)
    for _ in range(total // chunk):
        yield b" " * chunk


@pytest.mark.parametrize("length_known", [True, False])
def test_an_oversized_answer_is_refused_without_being_read_whole(length_known):
    """300 MB announced by Content-Length is refused before reading; streamed (chunked),
    reading stops past the bound, and the server could send little more than that."""
    total = 300 * 1024**2

    def huge(body):
        headers = {"Content-Length": str(total)} if length_known else {}
        return 200, headers, stream(total)

    with Misbehaving(huge) as fake:
        client = HttpClient(fake.url, timeout_s=30, max_response_bytes=8 * 1024**2)
        t0 = time.monotonic()
        reply = client.request("POST", "/v1/score", wire().encode([1], [[2]], LABELS))
        took = time.monotonic() - t0
        client.close()
        time.sleep(0.2)
        sent = fake.sent
    assert reply.status == "oversized" and "longer than 8388608 bytes" in reply.text()
    assert ("Content-Length 314572800" in reply.text()) == length_known
    assert took < 10 and sent < 64 * 1024**2, (took, sent)  # nowhere near 300 MB


@pytest.mark.slow
def test_a_run_fails_a_case_whose_server_answers_nan_naming_request_and_item(tmp_path):
    calls = iter(range(10**6))

    def nan_on_third(body):  # warmup (0) and request 1 fine, request 2 has a NaN in item 1
        n = len(body["items"])
        scores = [[0.25, 0.5]] * n
        if next(calls) == 2:
            scores = [[0.25, 0.5], [float("nan"), 0.5]] + scores[2:]
        return 200, {}, [json.dumps({"scores": scores}).encode()]

    with Misbehaving(nan_on_third) as fake:
        text = f"""
            name: nan
            model: {{path: "embedded:tiny"}}
            workload: {{query_tokens: 8, num_items: 3, item_tokens: 2,
                       label_token_ids: [198, 9834], delimiter: 151643, seed: 1}}
            cases:
              - {{engine: http, mode: single, base_url: "{fake.url}", clients: 1,
                 requests: 4, max_error_rate: 1}}
        """
        record = run(plan_of(load_config(write_config(tmp_path, text), []),
                             out=tmp_path / "out", progress=False, peak=fixed_peak()))
    (case,) = record.cases
    assert case.status == "failed" and case.error.type == "InvalidScores"  # rate 1 or not
    assert "request 2: item 1: score 0 is nan" in case.error.message
    assert case.http.errors == {"invalid": 1} and exit_code(record) == 3
    (path,) = (tmp_path / "out").glob("*.json")

    def refuse(constant):
        raise AssertionError(f"the artifact holds {constant}")

    json.loads(path.read_text(), parse_constant=refuse)  # no NaN or Infinity anywhere

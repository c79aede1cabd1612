"""`mibench serve`: the JAX engine behind SGLang's /v1/score. Its scores are the engine's,
bad requests are 400 naming the field, bad flags are one line and exit 2."""

from __future__ import annotations

import json
import re
import socket
import urllib.error
import urllib.request

import pytest
from typer.testing import CliRunner

from mibench.engines import HttpClient, MibenchError, wire
from mibench.harness.cli import app
from mibench.harness.serve import Served, Settings, build_app, prepare

DELIM = 151643
LABELS = [198, 9834]


def post(url: str, body) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url + "/v1/score", data=data,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_listens_on_localhost_only(served):
    assert served.url.startswith("http://127.0.0.1:")
    assert served.sock.getsockname()[0] == "127.0.0.1"


@pytest.mark.parametrize("softmax", [False, True])
def test_scores_are_the_engines(served, jax_tiny, make_request, softmax):
    query, items = make_request(3, query_len=24, num_items=5, item_len=4)
    status, body = post(served.url, {"query": query, "items": items, "label_token_ids": LABELS,
                                     "apply_softmax": softmax, "model": "embedded:tiny"})
    want = jax_tiny.score(query, items, LABELS, mode="packed", apply_softmax=softmax,
                          delimiter=DELIM)
    assert status == 200
    assert body["scores"] == want.scores  # the same floats: JSON round-trips them exactly
    assert body["model"] == "embedded:tiny" and body["object"] == "scoring"
    assert body["usage"] == {"prompt_tokens": want.num_tokens, "completion_tokens": 0,
                             "total_tokens": want.num_tokens}


def test_text_query_and_items(served, jax_tiny):
    status, body = post(served.url, {"query": "is it good?", "items": ["yes", "no"],
                                     "label_token_ids": LABELS})
    assert status == 200
    assert body["scores"] == jax_tiny.score("is it good?", ["yes", "no"], LABELS,
                                            mode="packed", delimiter=DELIM).scores
    status, one = post(served.url, {"query": "is it good?", "items": "yes",
                                    "label_token_ids": LABELS})  # SGLang: one text item
    assert status == 200 and one["scores"] == body["scores"][:1]


@pytest.mark.parametrize("body,field", [
    (b"{not json", "body"),
    ([1, 2], "body"),
    ({"items": [[5]], "label_token_ids": LABELS}, "query"),
    ({"query": [1], "label_token_ids": LABELS}, "items"),
    ({"query": [1], "items": [[5]]}, "label_token_ids"),
    ({"query": [1], "items": [""], "label_token_ids": LABELS}, "items"),
    ({"query": [1], "items": [[]], "label_token_ids": LABELS}, "items[0]"),
    ({"query": [], "items": [[5]], "label_token_ids": LABELS}, "query"),
    ({"query": [1, 2.5], "items": [[5]], "label_token_ids": LABELS}, "query"),
    ({"query": [1], "items": [[5], [999999]], "label_token_ids": LABELS}, "items[1]"),
    ({"query": [1], "items": [[5, DELIM]], "label_token_ids": LABELS}, "items[0]"),
    ({"query": [1], "items": [[5]], "label_token_ids": [10**7]}, "label_token_ids"),
    ({"query": [1], "items": [[5], "text"], "label_token_ids": LABELS}, "items"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "apply_softmax": 2},
     "apply_softmax"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "apply_softmax": "maybe"},
     "apply_softmax"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "item_first": None},
     "item_first"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "model": 7}, "model"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "apply_sofmax": True},
     "apply_sofmax"),
    ({"query": "text", "items": [[5]], "label_token_ids": LABELS}, "items"),
    ({"query": [1], "items": ["text"], "label_token_ids": LABELS}, "items"),
    ({"query": [1], "items": [[5]], "label_token_ids": [[198], [9834]]}, "label_token_ids"),
    ({"query": [1], "items": [[5]], "label_token_ids": [198, 198]}, "label_token_ids"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "temperature": 0.5},
     "temperature"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS, "item_first": True,
      "mibench": {"mode": "packed"}}, "item_first"),
    (b'{"query": "\\ud800 x", "items": ["a"], "label_token_ids": [198]}', "query"),
    (b'{"query": "ok", "items": ["a", "b\\udfff"], "label_token_ids": [198]}', "items[1]"),
    (b'{"query": [1], "items": [[5]], "label_token_ids": [198], "model": "\\udc80"}',
     "model"),
    (b'{"query": "caf\xe9", "items": ["a"], "label_token_ids": [198]}', "body"),
    ({"query": [1], "items": [[5]], "label_token_ids": LABELS,
      "return_pooled_hidden_states": True}, "return_pooled_hidden_states"),
])
def test_bad_requests_are_400_naming_the_field(served, body, field):
    status, error = post(served.url, body)
    assert status == 400, error
    assert error["param"] == field and error["code"] == 400 and error["object"] == "error"
    assert error["type"] == "BadRequestError" and error["message"]


def post_as(url: str, data: bytes, content_type: str | None) -> tuple[int, dict]:
    headers = {} if content_type is None else {"Content-Type": content_type}
    req = urllib.request.Request(url + "/v1/score", data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


# --- SGLang's contract (harness/serve/request.py: the same where SGLang's code decides) ---

@pytest.mark.parametrize("items", [[], ""])
def test_no_items_is_no_scores_as_in_sglang(served, items):
    status, body = post(served.url, {"query": [1, 2], "items": items,
                                     "label_token_ids": LABELS})
    assert status == 200 and body["scores"] == [] and body["object"] == "scoring"
    assert body["usage"] == {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


def test_any_model_name_is_echoed(served):
    request = {"query": [1, 2], "items": [[3]], "label_token_ids": LABELS}
    for name, echoed in (("default", "default"), ("Qwen/Qwen3-0.6B", "Qwen/Qwen3-0.6B"),
                         (None, "embedded:tiny")):
        status, body = post(served.url, {**request, **({"model": name} if name else {})})
        assert status == 200 and body["model"] == echoed


@pytest.mark.parametrize("value,means", [(True, True), ("true", True), ("True", True), (1, True),
                                         ("yes", True), ("on", True), (False, False),
                                         ("false", False), (0, False), ("0", False)])
def test_booleans_are_coerced_as_sglangs_pydantic_does(served, value, means):
    request = {"query": [1, 2], "items": [[3], [4]], "label_token_ids": LABELS}
    status, got = post(served.url, {**request, "apply_softmax": value})
    assert status == 200, got
    _, want = post(served.url, {**request, "apply_softmax": means})
    assert got["scores"] == want["scores"]


def test_unknown_keys_are_ignored_as_in_sglang(served):
    request = {"query": [1, 2], "items": [[3]], "label_token_ids": LABELS}
    status, plain = post(served.url, request)
    status2, extra = post(served.url, {**request, "rid": "r-1", "stream": False,
                                       "temperature": 1.0, "return_token_logprobs": False})
    assert status == status2 == 200 and plain["scores"] == extra["scores"]
    status, error = post(served.url, {**request, "item_frist": True})  # a typo: refused
    assert status == 400 and error["param"] == "item_frist"
    assert "did you mean 'item_first'" in error["message"]


@pytest.mark.parametrize("content_type,status", [
    ("application/json", 200), ("application/json; charset=utf-8", 200),
    ("Application/JSON", 200), ("text/plain", 400), ("application/x-www-form-urlencoded", 400),
    (None, 400)])
def test_only_json_content_types_as_in_sglang(served, content_type, status):
    data = json.dumps({"query": [1, 2], "items": [[3]], "label_token_ids": LABELS}).encode()
    got, body = post_as(served.url, data, content_type)
    assert got == status, body
    if status == 400:
        assert body["param"] == "content-type" and "application/json" in body["message"]


@pytest.mark.slow
def test_item_first_scores_item_then_query(served, jax_tiny, make_request):
    """SGLang's item_first: each item before the query; the next token after the query."""
    query, items = make_request(7, query_len=12, num_items=4, item_len=(2, 6))
    for softmax in (False, True):
        status, body = post(served.url, {"query": query, "items": items, "item_first": True,
                                         "label_token_ids": LABELS, "apply_softmax": softmax})
        assert status == 200, body
        want = [jax_tiny.score(item, [query], LABELS, mode="single", delimiter=DELIM,
                               apply_softmax=softmax) for item in items]
        assert body["scores"] == [w.scores[0] for w in want]
        assert body["usage"]["prompt_tokens"] == sum(w.num_tokens for w in want)
    _, forward = post(served.url, {"query": query, "items": items, "label_token_ids": LABELS})
    assert forward["scores"] != body["scores"]  # a different sequence: different scores
    status, error = post(served.url, {"query": [1, 999999], "items": [[3]], "item_first": True,
                                      "label_token_ids": LABELS})
    assert status == 400 and error["param"] == "query", error  # fields put back
    status, error = post(served.url, {"query": [1], "items": [[3], [4, 999999]],
                                      "item_first": "true", "label_token_ids": LABELS})
    assert status == 400 and error["param"] == "items[1]", error


def test_health_and_models(served):
    with urllib.request.urlopen(served.url + "/health", timeout=10) as resp:
        assert resp.status == 200 and json.loads(resp.read()) == {"status": "ok"}
    with urllib.request.urlopen(served.url + "/v1/models", timeout=10) as resp:
        (card,) = json.loads(resp.read())["data"]
    assert card["id"] == "embedded:tiny" and card["max_model_len"] == 40960
    limits = card["mibench"].pop("limits")
    assert card["mibench"] == {"engine": "jax", "mode": "packed", "delimiter": DELIM,
                               "semantics": "delimited", "dtype": "float32", "tp": 1,
                               "options": {}}
    assert limits["max_items"] == 4096 and limits["max_request_memory"] <= 8 * 1024**3


def test_keep_alive_client_and_a_server_gone(served):
    client = HttpClient(served.url, timeout_s=30)
    body = wire().encode([1, 2], [[3], [4]], LABELS)
    assert [client.request("POST", "/v1/score", body).status
            for _ in range(3)] == [200, 200, 200]
    client.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reply = HttpClient(f"http://127.0.0.1:{port}", timeout_s=5).request("POST", "/v1/score",
                                                                         body)
    assert reply.status == "refused" and "Refused" in reply.text()


class PlainOnly:
    """An engine whose score takes no `semantics` (the delimiter decides)."""

    def score(self, query, items, label_token_ids, mode="single", apply_softmax=False,
              delimiter=None, **options):
        return None


def test_prepare_refuses_what_the_engine_cannot_score(jax_tiny):
    with pytest.raises(MibenchError, match="--delimiter"):
        prepare(jax_tiny, Settings(model="embedded:tiny", mode="packed"))
    with pytest.raises(MibenchError, match="^--semantics: .*plain is not available"):
        prepare(PlainOnly(), Settings(model="embedded:tiny", delimiter=DELIM,
                                      semantics="plain"))
    same = prepare(PlainOnly(), Settings(model="embedded:tiny", delimiter=DELIM,
                                         semantics="delimited"))
    assert same.semantics is None and same.resolved_semantics == "delimited"


@pytest.mark.parametrize("args,needle", [
    (["--mode", "nope"], "--mode: unknown mode 'nope'"),
    (["--semantics", "both"], "--semantics: must be one of delimited, plain"),
    (["--option", "mask=dense"], "--option: mask: mode 'single' does not take"),
    (["--delimiter", "999999999"], "--delimiter: 999999999 is outside the vocabulary"),
    (["--port", "70000"], "--port: must be in 0..65535"),
    (["--dtype", "int8"], "--dtype: must be one of float32, bfloat16"),
])
def test_serve_flags_are_one_line_exit_2(args, needle):
    result = CliRunner().invoke(app, ["serve", "--model", "embedded:tiny", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], lines


@pytest.mark.slow
def test_serve_busy_port_is_one_line_exit_2():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--model", "embedded:tiny", "--port",
                                          str(port)])
    assert result.exit_code == 2
    assert result.output.strip().startswith(f"error: --port: cannot listen on 127.0.0.1:{port}")


# --- mibench's per-request settings and the queue ---

@pytest.mark.parametrize("extra", [{"mode": "single"}, {"mode": "chunked", "chunk_size": 2},
                                   {"mask": "segment"}, {"mode": "prefill_extend",
                                                          "extend_batch_size": 2}])
def test_per_request_mode_and_options(served, jax_tiny, make_request, extra):
    query, items = make_request(11, query_len=12, num_items=5, item_len=3)
    status, body = post(served.url, {"query": query, "items": items, "label_token_ids": LABELS,
                                     "mibench": extra})
    assert status == 200, body
    kwargs = {"mode": "packed", **extra}
    want = jax_tiny.score(query, items, LABELS, delimiter=DELIM, **kwargs).scores
    assert body["scores"] == want


@pytest.mark.parametrize("extra,field,needle", [
    ("fast", "mibench", "must be an object"),
    ({"mode": "nope"}, "mibench.mode", "unknown mode 'nope'"),
    ({"mode": "single", "mask": "dense"}, "mibench.mask", "does not take"),
    ({"mask": "diagonal"}, "mibench.mask", "diagonal"),
    ({"mode": "chunked", "chunk_size": 0}, "mibench.chunk_size", "0"),
    ({"mode": "prefill_extend", "extend_batch_size": "x"}, "mibench.extend_batch_size", "x"),
])
def test_bad_per_request_settings_are_400_naming_the_field(served, extra, field, needle):
    status, error = post(served.url, {"query": [1], "items": [[5]], "label_token_ids": LABELS,
                                      "mibench": extra})
    assert status == 400 and error["param"] == field, error
    assert needle in error["message"] and "\n" not in error["message"]


class Recorder:
    """An engine that records the order it is called in, slowly."""

    model_config = None

    def __init__(self):
        self.calls, self.active, self.most = [], 0, 0

    def score(self, query, items, label_token_ids, mode="single", apply_softmax=False,
              delimiter=None, **options):
        import time

        from mibench.engines import ScoreResult

        self.active += 1
        self.most = max(self.most, self.active)
        time.sleep(0.05)
        self.calls.append(query[0])
        self.active -= 1
        return ScoreResult(scores=[[0.0] for _ in items], mode=mode, num_items=len(items),
                           num_tokens=1)


@pytest.mark.slow
def test_requests_are_scored_one_at_a_time_in_arrival_order():
    import threading
    import time

    engine = Recorder()
    with Served(build_app(engine, Settings(model="embedded:tiny"))) as server:
        threads = []
        for i in range(8):  # each sent after the one before has arrived (queued)
            t = threading.Thread(target=post, args=(server.url, {
                "query": [i], "items": [[1]], "label_token_ids": [2]}))
            t.start()
            threads.append(t)
            time.sleep(0.02)
        for t in threads:
            t.join(30)
    assert engine.calls == list(range(8)) and engine.most == 1


# --- a real `mibench serve` process on 127.0.0.1 ---

@pytest.fixture(scope="module")
def process():
    """`mibench serve` (embedded:tiny, packed, delimited) as a process on a free port of
    127.0.0.1; the last test stops it with SIGINT, or the teardown does."""
    import os
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-m", "mibench.harness.cli", "serve", "--model",
                             "embedded:tiny", "--mode", "packed", "--delimiter", str(DELIM),
                             "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = proc.stdout.readline().decode().strip()  # ready: its address, alone, on stdout
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), (url, proc.stderr.read().decode())
    deadline = time.monotonic() + 120
    while HttpClient(url, 5).request("GET", "/health").status != 200:
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, "mibench serve did not answer in 120 s"
        time.sleep(0.2)
    proc.url = url
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)
    proc.stdout.close()
    proc.stderr.close()


@pytest.mark.slow
def test_process_answers_the_http_engine(process, jax_tiny, make_request):
    import numpy as np

    from mibench.engines import load_engine

    http = load_engine("http", model="embedded:tiny", base_url=process.url)
    query, items = make_request(20, query_len=24, num_items=6, item_len=4)
    for n in (1, 2, 4, 8):  # labels
        labels = list(range(100, 100 + 7 * n, 7))
        got = http.score(query, items, labels, delimiter=DELIM)
        want = jax_tiny.score(query, items, labels, mode="packed", delimiter=DELIM)
        np.testing.assert_allclose(got.scores, want.scores, rtol=1e-6, atol=1e-6)
        assert np.shape(got.scores) == (6, n) and got.num_tokens == want.num_tokens
        soft = http.score(query, items, labels, delimiter=DELIM, apply_softmax=True).scores
        np.testing.assert_allclose(np.sum(soft, axis=1), 1.0, rtol=1e-5)
    runs = [http.score(query, items, LABELS, delimiter=DELIM).scores for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    http.close()


@pytest.mark.slow
def test_process_sglang_requests_text_and_unicode(process, jax_tiny):
    import numpy as np

    for query in ("Is this good? Is it ok", "ça va? 日本語 🙂"):  # 22 bytes each
        status, body = post(process.url, {"query": query, "items": ["oui", "nein 🙁", "是"],
                                          "label_token_ids": LABELS, "apply_softmax": True})
        assert status == 200, body
        want = jax_tiny.score(query, ["oui", "nein 🙁", "是"], LABELS, mode="packed",
                              delimiter=DELIM, apply_softmax=True).scores
        np.testing.assert_allclose(body["scores"], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np.sum(body["scores"], axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("body", [b"", b"{", b"null", b'{"query": [1]}',
                                  b'{"query": [1], "items": [[2]], "label_token_ids": "x"}'])
@pytest.mark.slow
def test_process_malformed_bodies_are_400_with_one_message(process, body):
    status, error = post(process.url, body)
    assert status == 400 and error["code"] == 400 and error["param"]
    assert isinstance(error["message"], str) and "\n" not in error["message"].strip()


@pytest.mark.slow
def test_process_answers_64_concurrent_requests(process, jax_tiny, make_request):
    import http.client
    from concurrent.futures import ThreadPoolExecutor

    query, items = make_request(20, query_len=24, num_items=6, item_len=4)  # compiled above
    want = jax_tiny.score(query, items, LABELS, mode="packed", delimiter=DELIM).scores
    port = int(process.url.rsplit(":", 1)[1])

    def one(i):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("POST", "/v1/score", json.dumps(
            {"query": query, "items": items, "label_token_ids": LABELS}),
            {"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, json.loads(data)

    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(one, range(64)))
    assert [s for s, _ in answers] == [200] * 64
    assert all(b["scores"] == want for _, b in answers)


@pytest.mark.slow
def test_process_sigint_drains_the_request_in_flight(process, make_request):
    """Last: Ctrl-C while slow requests are in flight (one scoring, one queued): both are
    answered 200, then the process exits 0."""
    import signal
    import threading
    import time

    assert HttpClient(process.url, 10).request("GET", "/health").status == 200
    query, items = make_request(4, query_len=300, num_items=8, item_len=10)  # new shapes
    slow = json.dumps({"query": query, "items": items, "label_token_ids": LABELS,
                       "mibench": {"mode": "single"}}).encode()
    answers, done_at = [], []

    def send():
        answers.append(HttpClient(process.url, 300).request("POST", "/v1/score", slow))
        done_at.append(time.monotonic())

    threads = [threading.Thread(target=send) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    signalled = time.monotonic()
    process.send_signal(signal.SIGINT)
    for t in threads:
        t.join(300)
    assert [a.status for a in answers] == [200, 200], [a.text(200) for a in answers]
    assert min(done_at) > signalled  # answered after the signal: drained, not dropped
    assert process.wait(60) == 0
    assert "stopped" in process.stderr.read().decode()
    assert process.stdout.read() == b""  # the address was stdout's only line

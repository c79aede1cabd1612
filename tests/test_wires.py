"""One seam for server wires (engines/wires/): the http engine and the load generator
speak only through a wire, so a server with another API is one wire class and one line in
WIRES. Proved with a toy API ("/rank": prompt and candidates in, probabilities out) served
by a stdlib fake: the engine scores through it, an http case measures a load through it,
and nothing of SGLang's body is sent."""

from __future__ import annotations

import http.server
import inspect
import json
import textwrap
import threading

import pytest

from mibench.engines import HttpClient, load_engine
from mibench.engines.http_client import Reply
from mibench.engines.wires import WIRES, wire
from mibench.errors import InputError, MibenchError
from mibench.harness.config import load_config
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import exit_code, run


def toy_probs(prompt, candidate, labels):
    """The fake's scores: a softmax over labels of a hash of the tokens, per candidate."""
    import math

    logits = [((sum(prompt) * 31 + sum(candidate) * 7 + label) % 97) / 20 for label in labels]
    z = sum(math.exp(x) for x in logits)
    return [math.exp(x) / z for x in logits]


class Toy:
    """A wire for the toy API: POST /rank {prompt, candidates, labels} ->
    {"results": [{"probs": [...]}, ...]}; a 422 {"bad": FIELD, "why": ...} refuses."""

    name = "toy"

    @staticmethod
    def encode(query, items, label_token_ids, apply_softmax=False, model=None) -> bytes:
        return json.dumps({"prompt": list(query), "candidates": [list(i) for i in items],
                           "labels": list(label_token_ids)}).encode()

    @staticmethod
    def send(client, body) -> Reply:
        return client.request("POST", "/rank", body)

    @staticmethod
    def decode(reply, num_items, num_labels, apply_softmax=False, dtype="float32"):
        rows = [r["probs"] for r in json.loads(reply.body)["results"]]
        if len(rows) != num_items or any(len(r) != num_labels for r in rows):
            raise ValueError(f"expected {num_items} x {num_labels} probabilities")
        return rows

    @staticmethod
    def usage(reply):
        return None

    @staticmethod
    def error(reply) -> InputError:
        data = json.loads(reply.body)
        return InputError(data["why"], field=data["bad"])

    @staticmethod
    def facts(client, served_model):
        return {}

    @staticmethod
    def info(client):
        return client.get_json("/about") or {}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list = []

    def _send(self, code, data):
        body = json.dumps(data).encode()
        self.wfile.write(f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    def do_GET(self):
        self._send(200, {"version": "toy-1"} if self.path == "/about" else {})

    def do_POST(self):
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Handler.seen.append((self.path, sorted(req)))
        if self.path != "/rank":
            return self._send(404, {})
        if not req["candidates"]:
            return self._send(422, {"bad": "candidates", "why": "no candidates"})
        self._send(200, {"results": [{"probs": toy_probs(req["prompt"], c, req["labels"])}
                                     for c in req["candidates"]]})

    def log_message(self, *args):
        pass


@pytest.fixture
def toy_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Handler.seen = []
    with WIRES.entry("toy", Toy):  # WIRES.add("toy", Toy), then removed
        yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.slow
def test_the_engine_scores_through_a_registered_wire(toy_server):
    engine = load_engine("http", model="embedded:tiny", base_url=toy_server, wire="toy")
    out = engine.score([1, 2, 3], [[4], [5, 6]], [10, 20], apply_softmax=True)
    assert out.scores == [toy_probs([1, 2, 3], [4], [10, 20]),
                          toy_probs([1, 2, 3], [5, 6], [10, 20])]
    assert Handler.seen == [("/rank", ["candidates", "labels", "prompt"])]  # no SGLang body
    with pytest.raises(InputError) as e:
        engine.score([1], [], [10])
    assert e.value.field in ("items", "candidates")
    assert wire("toy").info(HttpClient(toy_server)) == {"version": "toy-1"}
    with pytest.raises(MibenchError, match="unknown wire 'nope'"):
        load_engine("http", model="embedded:tiny", base_url=toy_server, wire="nope")


@pytest.mark.slow
def test_an_http_case_measures_a_load_through_the_wire(toy_server, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""
        name: toy
        model: {{path: "embedded:tiny", dtype: float32}}
        workload: {{query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [10, 20],
                   apply_softmax: true, seed: 0}}
        cases:
          - {{engine: http, mode: single, base_url: "{toy_server}", wire: toy, clients: 2,
             requests: 6}}
        """))
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False,
                         workers=False))  # the toy wire lives in this process
    (case,) = record.cases
    assert exit_code(record) == 0 and case.http.ok == 6, case.error
    assert {p for p, _ in Handler.seen} == {"/rank"} and len(Handler.seen) == 7  # + warmup
    assert case.params["wire"] == "toy"


def test_an_unknown_wire_in_a_config_names_the_key(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: w\nmodel: {path: 'embedded:tiny'}\n"
                    "workload: {query_tokens: 4, num_items: 1, item_tokens: 1, "
                    "label_token_ids: [1]}\ncases:\n  - {engine: http, mode: single, "
                    "base_url: 'http://127.0.0.1:1', wire: grpc, clients: 1}\n")
    with pytest.raises(MibenchError, match=r"cases\.0\.wire.*unknown wire 'grpc'"):
        load_config(path)


def test_every_registered_wire_is_a_wire():
    """Each WIRES entry implements engines/wires.Wire (the toy above does too), and the
    default wire is named once and agrees with the default an http case's plan writes."""
    from mibench.engines.http_engine import HttpEngine
    from mibench.engines.wires import DEFAULT_WIRE, Wire
    from mibench.harness.config.cases import HttpPlan

    assert DEFAULT_WIRE in WIRES
    for name in WIRES:
        w = wire(name)
        assert isinstance(w, Wire), name
        assert w.name == name
    assert wire().name == DEFAULT_WIRE
    assert isinstance(Toy(), Wire)
    assert not isinstance(object(), Wire)
    assert HttpPlan().wire == DEFAULT_WIRE
    assert inspect.signature(HttpEngine).parameters["wire"].default == DEFAULT_WIRE

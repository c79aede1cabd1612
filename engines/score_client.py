"""The wire client of SGLang's `POST /v1/score` (stdlib `http.client`, one keep-alive
connection per client): what the `http` engine (engines/http_engine.py) and the harness's
load generator (harness/run/http_case.py) send and read.

`ScoreClient.post` never raises for a request that got no HTTP answer: the `Reply` then
carries a status of `refused`, `timeout` or `connection` and the reason, so a load
generator counts it as a failed request; an answer longer than `max_response_bytes`
(MAX_RESPONSE_BYTES) is `oversized`, refused from its Content-Length or as soon as reading
passes the bound, never read whole. `parse_scores` checks a 200 reply's scores where they
enter: the request's shape, finite probabilities in [0, 1], and rows that sum to 1 (apply_softmax)
or at most 1 (exp of log-probabilities) within the dtype's tolerance (`row_tolerance`);
anything else is a ValueError naming the item.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import math
import urllib.parse

from mibench.errors import MibenchError

DEFAULT_TIMEOUT_S = 60.0
SCORE_PATH = "/v1/score"
MODELS_PATH = "/v1/models"
SERVER_INFO_PATH = "/get_server_info"
# what a status of a request that got no HTTP response is called
REFUSED, TIMEOUT, CONNECTION = "refused", "timeout", "connection"
OVERSIZED = "oversized"  # an answer longer than the client's bound, not read whole
# the longest answer read: 4,096 items x 100 labels at 25 characters a score is 10 MiB
MAX_RESPONSE_BYTES = 64 * 1024**2
# how far a row of softmax probabilities may sum from 1: float32 rounds each of n
# probabilities by at most 2^-24 (row_tolerance), bfloat16 softmax probabilities are
# judged to 2e-2 (docs/parity.md)
ROW_TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}


@dataclasses.dataclass(frozen=True)
class Reply:
    """What came back for one request: `status` is the HTTP status, or `refused`,
    `timeout`, `connection` when no response came; `body` the response's bytes, or the
    failure's reason."""

    status: int | str
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status == 200

    def text(self, limit: int | None = None) -> str:
        text = self.body.decode("utf-8", errors="replace")
        return text if limit is None or len(text) <= limit else text[:limit] + "..."


def parse_base_url(url) -> tuple[str, str, int, str]:
    """(scheme, host, port, path prefix) of `http://HOST[:PORT][/PREFIX]`, or a
    MibenchError naming `base_url`."""
    if not isinstance(url, str) or not url:
        raise MibenchError(f"must be a URL like http://127.0.0.1:8000, got {url!r}",
                           field="base_url")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as e:
        raise MibenchError(f"{url!r} is not a URL: {e}", field="base_url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise MibenchError(f"expected http://HOST[:PORT] or https://..., got {url!r}",
                           field="base_url")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise MibenchError(f"expected http://HOST[:PORT][/PREFIX] without a query, fragment "
                           f"or user, got {url!r}", field="base_url")
    default = 443 if parts.scheme == "https" else 80
    return parts.scheme, parts.hostname, port or default, parts.path.rstrip("/")


def score_body(query, items, label_token_ids, apply_softmax: bool = False,
               model: str | None = None) -> dict:
    """SGLang's ScoringRequest for query + item scoring (`item_first` false); `model`
    only when a served name is given."""
    body = {"query": _plain(query), "items": [_plain(i) for i in items] if isinstance(
        items, list | tuple) or hasattr(items, "tolist") else items,
        "label_token_ids": _plain(label_token_ids), "apply_softmax": apply_softmax,
        "item_first": False}
    if model is not None:
        body["model"] = model
    return body


def _plain(value):
    """Lists of Python ints for JSON (tuples, numpy arrays); text and anything else as is
    (the server names what is wrong with it)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return list(value) if isinstance(value, tuple) else value


def describe(value) -> str:
    """A server fact as a reader should see it: a token id, a name, or, for anything else,
    its JSON type and value (so `"151643"` never reads like the token id 151643)."""
    if value is None:
        return "none"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"token id {value}"
    kind = {str: "a string", bool: "a boolean", float: "a number", list: "a list",
            dict: "an object"}.get(type(value), type(value).__name__)
    return f"{kind} ({json.dumps(value)[:40]})"


def fact_problem(facts: dict, key: str, wanted) -> str | None:
    """What differs between what a server reports (`facts[key]`, GET /v1/models) and what
    the request or case wants, in words that say when only the types differ; None when
    they agree or the server does not say."""
    if key not in facts:
        return None
    got = facts[key]
    if got == wanted and type(got) is type(wanted):
        return None
    if isinstance(wanted, str):  # semantics, dtype: names
        if isinstance(got, str):
            return f"scores with {key} {got}"
        return f"reports its {key} as {describe(got)}, not a name"
    if type(got) is not type(wanted) and str(got) == str(wanted):
        return (f"reports its {key} as {describe(got)}, not as the {describe(wanted)}: "
                "the types differ (a server must report a token id)")
    return f"scores with {key} {describe(got)}"


class ScoreClient:
    """One keep-alive connection to a `/v1/score` server. Not thread-safe: one per thread.

    `post` never raises for a failed request: a refused connection, a timeout (`timeout_s`
    on connecting and on each read) or a dropped connection is a Reply with that status,
    and the next request opens a fresh connection."""

    def __init__(self, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S,
                 max_response_bytes: int = MAX_RESPONSE_BYTES):
        self.base_url = base_url
        self.scheme, self.host, self.port, self.prefix = parse_base_url(base_url)
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._conn: http.client.HTTPConnection | None = None

    parse_url = staticmethod(parse_base_url)
    fact_problem = staticmethod(fact_problem)  # for the load generator (http_case)

    @staticmethod
    def body(query, items, label_token_ids, apply_softmax: bool = False,
             model: str | None = None) -> bytes:
        """The JSON request body (score_body), encoded once so timed sends only send."""
        return json.dumps(score_body(query, items, label_token_ids, apply_softmax, model),
                          separators=(",", ":")).encode()

    def _connection(self) -> http.client.HTTPConnection:
        if self._conn is None:
            cls = (http.client.HTTPSConnection if self.scheme == "https"
                   else http.client.HTTPConnection)
            self._conn = cls(self.host, self.port, timeout=self.timeout_s)
        return self._conn

    def request(self, method: str, path: str, body: bytes | None = None) -> Reply:
        """One request; a keep-alive connection the server closed meanwhile is retried
        once on a fresh one (scoring is idempotent)."""
        for attempt in (0, 1):
            reused = self._conn is not None and self._conn.sock is not None
            conn = self._connection()
            try:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                conn.request(method, self.prefix + path, body=body, headers=headers)
                resp = conn.getresponse()
                data = self._read(resp)
                if data is None:
                    self.close()  # the rest of the answer is left unread
                    return Reply(OVERSIZED, f"HTTP {resp.status}: the answer is longer than "
                                 f"{self.max_response_bytes} bytes (Content-Length "
                                 f"{resp.getheader('Content-Length', 'not given')}); not "
                                 "read".encode())
                if resp.will_close:
                    self.close()
                return Reply(resp.status, data)
            except ConnectionRefusedError as e:
                self.close()
                return Reply(REFUSED, _reason(e).encode())
            except TimeoutError as e:
                self.close()
                return Reply(TIMEOUT, f"no answer within {self.timeout_s:g} s ({_reason(e)})"
                             .encode())
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if reused and attempt == 0 and isinstance(
                        e, http.client.RemoteDisconnected | ConnectionResetError
                        | BrokenPipeError):
                    continue  # an idle keep-alive connection the server had closed
                return Reply(CONNECTION, _reason(e).encode())
        raise AssertionError("unreachable")  # pragma: no cover

    def server_info(self) -> dict:
        """What the server says about itself, for provenance: SGLang's `GET
        /get_server_info` (sglang, sglang-jax and mibench serve answer it; its `version`
        and settings), trimmed to scalars and short lists; {} when it does not say."""
        reply = self.request("GET", SERVER_INFO_PATH)
        if not reply.ok:
            return {}
        try:
            data = json.loads(reply.body)
        except ValueError:
            return {}
        if not isinstance(data, dict):
            return {}
        return {k: v for k, v in data.items() if isinstance(k, str) and (
            isinstance(v, str | int | float | bool) or v is None
            or (isinstance(v, list) and len(v) <= 16
                and all(isinstance(x, str | int | float | bool) for x in v)))}

    def _read(self, resp: http.client.HTTPResponse) -> bytes | None:
        """The answer's body, or None when it is longer than max_response_bytes: refused
        from its Content-Length before reading, else once reading passes the bound."""
        bound = self.max_response_bytes
        length = resp.getheader("Content-Length")
        if length is not None and length.strip().isdigit() and int(length) > bound:
            return None
        data = resp.read(bound + 1)  # the whole answer, unless it is longer than the bound
        return None if len(data) > bound else data

    def post(self, body: bytes) -> Reply:
        """POST a prepared body to /v1/score."""
        return self.request("POST", SCORE_PATH, body)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def row_tolerance(dtype: str | None, num_labels: int) -> float:
    """How far a softmax row may sum from 1: the dtype's tolerance (ROW_TOLERANCE, the
    loosest for a dtype not listed), and for float32 at least n rounding errors of 2^-23."""
    base = ROW_TOLERANCE.get(dtype, max(ROW_TOLERANCE.values()))
    return max(base, num_labels * 2.0**-23)


def parse_scores(reply: Reply, num_items: int, num_labels: int, apply_softmax: bool = False,
                 dtype: str | None = "float32") -> list[list[float]]:
    """The scores of a 200 reply, checked against the request: its shape, every score a
    finite probability in [0, 1], and each row summing to 1 (apply_softmax) or to at most
    1 (probabilities of some labels under the full vocabulary) within the dtype's
    `row_tolerance`; a ValueError naming the item (its index in the request) otherwise."""
    tolerance = row_tolerance(dtype, num_labels)
    try:
        data = json.loads(reply.body)
    except ValueError:
        raise ValueError(f"not JSON: {reply.text(200)!r}") from None
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, list) or len(scores) != num_items:
        got = f"{len(scores)} rows" if isinstance(scores, list) else type(scores).__name__
        raise ValueError(f"expected scores for {num_items} item(s) x {num_labels} label(s), "
                         f"got {got}: {reply.text(200)!r}")
    for i, row in enumerate(scores):
        _check_row(i, row, num_labels, apply_softmax, tolerance)
    return [[float(s) for s in row] for row in scores]


def _check_row(i: int, row, num_labels: int, apply_softmax: bool, tolerance: float) -> None:
    if not isinstance(row, list) or len(row) != num_labels:
        raise ValueError(f"item {i}: expected {num_labels} score(s), got {row!r:.200}")
    for j, s in enumerate(row):
        if isinstance(s, bool) or not isinstance(s, int | float):
            raise ValueError(f"item {i}: score {j} is {s!r:.50}, not a number")
        if not math.isfinite(s):
            raise ValueError(f"item {i}: score {j} is {s}, not a finite probability")
        if not 0.0 <= s <= 1.0:
            raise ValueError(f"item {i}: score {j} is {s!r}, not a probability in [0, 1]")
    total = math.fsum(row)
    if apply_softmax and abs(total - 1.0) > tolerance:
        raise ValueError(f"item {i}: softmax scores sum to {total!r}, not 1 (tolerance "
                         f"{tolerance:g})")
    if not apply_softmax and total > 1.0 + tolerance:
        raise ValueError(f"item {i}: label probabilities sum to {total!r}, more than 1 "
                         f"(tolerance {tolerance:g})")

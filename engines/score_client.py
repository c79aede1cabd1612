"""The wire client of SGLang's `POST /v1/score` (stdlib `http.client`, one keep-alive
connection per client): what the `http` engine (engines/http_engine.py) and the harness's
load generator (harness/run/http_case.py) send and read.

`ScoreClient.post` never raises for a request that got no HTTP answer: the `Reply` then
carries a status of `refused`, `timeout` or `connection` and the reason, so a load
generator counts it as a failed request. `parse_scores` checks a 200 reply's scores against
the request's shape.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import urllib.parse

from mibench.errors import MibenchError

DEFAULT_TIMEOUT_S = 60.0
SCORE_PATH = "/v1/score"
MODELS_PATH = "/v1/models"
SERVER_INFO_PATH = "/get_server_info"
# what a status of a request that got no HTTP response is called
REFUSED, TIMEOUT, CONNECTION = "refused", "timeout", "connection"


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


class ScoreClient:
    """One keep-alive connection to a `/v1/score` server. Not thread-safe: one per thread.

    `post` never raises for a failed request: a refused connection, a timeout (`timeout_s`
    on connecting and on each read) or a dropped connection is a Reply with that status,
    and the next request opens a fresh connection."""

    def __init__(self, base_url: str, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.base_url = base_url
        self.scheme, self.host, self.port, self.prefix = parse_base_url(base_url)
        self.timeout_s = timeout_s
        self._conn: http.client.HTTPConnection | None = None

    parse_url = staticmethod(parse_base_url)

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
                data = resp.read()
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

    def post(self, body: bytes) -> Reply:
        """POST a prepared body to /v1/score."""
        return self.request("POST", SCORE_PATH, body)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _reason(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


def parse_scores(reply: Reply, num_items: int, num_labels: int) -> list[list[float]]:
    """The scores of a 200 reply, checked against the request's shape; a ValueError saying
    what is wrong with the body otherwise."""
    try:
        data = json.loads(reply.body)
    except ValueError:
        raise ValueError(f"not JSON: {reply.text(200)!r}") from None
    scores = data.get("scores") if isinstance(data, dict) else None
    if not isinstance(scores, list) or len(scores) != num_items or any(
            not isinstance(row, list) or len(row) != num_labels
            or not all(isinstance(s, int | float) and not isinstance(s, bool) for s in row)
            for row in scores):
        raise ValueError(f"expected scores for {num_items} item(s) x {num_labels} label(s), "
                         f"got {reply.text(200)!r}")
    return [[float(s) for s in row] for row in scores]

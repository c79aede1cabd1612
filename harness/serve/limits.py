"""What keeps `mibench serve` standing (harness/serve/app.py): the limits a deployment sets,
admission of a request before any work, the body read under a size and time limit, and the
scoring queue's bound.

Defaults keep a 24 GiB machine safe with the embedded presets (a server of `tiny` holds
0.7 GiB once started): at most one request is scored at a time, within
`max_request_memory` (8 GiB, or a third of this machine's memory when that is less) by
the estimator `mibench validate` uses (`Mode.host_bytes` with the model, which counts the
device working set: on a CPU that is host memory); up to `max_queue` (64) admitted requests
wait, each at most `max_tokens` (262,144 tokens run, about 15 MiB of token lists); up to
`max_connections` (128) connections each hold at most a `max_body` (8 MiB) body while it
arrives. Worst case beyond the model: 8 + 1 + 1 GiB.

The connections' own deadlines and cap: harness/serve/connections.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait

from mibench.engines import MODES, PART_OPTION, PIECE_CHARS, MibenchError, Shape, pieces

from ..util import GIB, LIMITS, byte_size
from .request import BadRequest, ScoreCall


@dataclasses.dataclass(frozen=True)
class Limits:
    """A deployment's limits (`mibench serve` flags; module docstring for the defaults)."""

    max_items: int = 4096
    max_tokens: int = 262_144  # tokens run through the model: usage.prompt_tokens
    max_request_memory: int | None = None  # None: min(8 GiB, this machine's memory / 3)
    max_queue: int = 64  # admitted requests not yet answered, the one scoring included
    max_body: int = 8 * 1024**2
    max_connections: int = 128
    header_timeout: float = 10.0  # seconds for a request's headers, from an idle connection
    body_timeout: float = 30.0  # seconds for a request's body, once its headers are in
    keep_alive: float = 5.0  # seconds an idle keep-alive connection is kept
    shutdown_timeout: float = 30.0  # seconds requests in flight get after SIGTERM/SIGINT

    FLAGS = {"max_items": "--max-items", "max_tokens": "--max-tokens",
             "max_request_memory": "--max-request-memory", "max_queue": "--max-queue",
             "max_body": "--max-body", "max_connections": "--max-connections",
             "header_timeout": "--header-timeout", "body_timeout": "--body-timeout",
             "keep_alive": "--keep-alive", "shutdown_timeout": "--shutdown-timeout"}

    def resolved(self) -> Limits:
        """Every limit checked (a MibenchError naming the flag), memory resolved."""
        for name, flag in self.FLAGS.items():
            value = getattr(self, name)
            if value is None and name == "max_request_memory":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not \
                    0 < value < float("inf"):
                raise MibenchError(f"must be a positive number, got {value!r}", field=flag)
        if self.max_request_memory is not None:
            return self
        from mibench.engines import host_memory

        ram, _ = host_memory()
        memory = min(8 * GIB, ram // 3) if ram else 8 * GIB
        return dataclasses.replace(self, max_request_memory=memory)

    def describe(self) -> dict:
        """The limits as the model card shows them."""
        return {name: getattr(self, name) for name in self.FLAGS}

    def summary(self) -> str:
        """The limits as the start-up line shows them."""
        def shown(name, value):
            return gib(value) if name in ("max_request_memory", "max_body") else f"{value:g}"

        return ", ".join(f"{flag} {shown(name, getattr(self, name))}"
                         for name, flag in self.FLAGS.items())


SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_size(text, flag: str) -> int:
    """Bytes of `8GiB`, `512MiB`, `64k` or `1048576` (units are powers of 1024); a
    MibenchError naming the flag otherwise."""
    match = SIZE.fullmatch(str(text))
    if not match or float(match[1]) <= 0:
        raise MibenchError(f"must be a positive size such as 8GiB, 512MiB or 1048576, got "
                           f"{text!r}", field=flag)
    return int(float(match[1]) * 1024 ** " kmgt".index(match[2].lower() or " "))


def gib(n: float) -> str:
    """A size as a reader wants it: GiB from 0.1 GiB, MiB from 0.1 MiB, KiB from 1 KiB,
    else bytes (`--max-body 4096` is 4.0 KiB, never 0.0 MiB)."""
    return byte_size(n, LIMITS)


# ---- admission: a request's shape against the limits, before any work ------------------


def _length(x, encode) -> int:
    """Tokens of a query or an item: ids counted, text encoded (or its UTF-8 bytes, the
    most a byte-level tokenizer makes, when there is no tokenizer); 0 for anything else
    (the engine names what is wrong with it)."""
    if isinstance(x, str):
        return len(encode(x)) if encode else len(x.encode("utf-8"))
    return len(x) if isinstance(x, list) else 0


def tokenize(call: ScoreCall, encode, budget: int | None = None) -> ScoreCall:
    """The call with its text encoded by `encode` (the engine's tokenizer, as the engine
    would encode each piece), so admission counts real tokens; unchanged without one.

    With a `budget` (--max-tokens: every mode runs each query and item token at least
    once) a long text is first counted piece by piece (`pieces`), and the request is 413
    as soon as its count passes the budget by more than one token per seam, before the
    rest of the text is tokenized: what a refused text costs is bounded by the budget,
    not by its size. Text that stays within it is then encoded whole, as the engine
    would."""
    if encode is None:
        return call
    left = budget if budget is not None else float("inf")

    def encoded(field: str, text: str) -> list[int]:
        nonlocal left
        if left < 0:  # already past: the mode runs every token at least once
            raise BadRequest(f"its text runs more tokens than this server's --max-tokens "
                             f"{budget} before {field}: send fewer or shorter items", field,
                             413)
        if len(text) > PIECE_CHARS:
            _count_within(field, text, encode, left)
        ids = encode(text)
        left -= len(ids)
        return ids

    if isinstance(call.query, str):
        call.query = encoded("query", call.query)
    if call.items and all(isinstance(i, str) for i in call.items):
        call.items = [encoded(f"items[{k}]", i) for k, i in enumerate(call.items)]
    return call


def _count_within(field: str, text: str, encode, left: float) -> None:
    """Count `text`'s tokens piece by piece; a BadRequest 413 naming `field` as soon as the
    count passes `left` by more than one token per seam (tokenize)."""
    counted = seams = read = 0
    for k, piece in enumerate(pieces(text)):
        counted += len(encode(piece))
        seams, read = seams + (k > 0), read + len(piece)
        if counted - seams > left:
            raise BadRequest(f"its text runs more tokens than this server's --max-tokens "
                             f"allows ({counted} counted in the first {read} of {len(text)} "
                             f"characters of {field}): send fewer or shorter items", field, 413)


def admit(call: ScoreCall, settings, limits: Limits, model) -> dict:
    """Check a parsed request against the limits, before any work: its items, the tokens
    it runs (the mode's `num_tokens`) and its estimated memory (`Mode.memory_fit` with the
    `model`'s facts); a BadRequest (413) naming the limit otherwise. Returns the estimate
    by part."""
    n = len(call.items)
    if n > limits.max_items:
        raise BadRequest(f"{n} items, more than this server's --max-items "
                         f"{limits.max_items}", "items", 413)
    mode_name = "single" if call.item_first else call.overrides.get("mode", settings.mode)
    mode = MODES["jax"][mode_name]
    options = call.overrides if call.overrides else (
        settings.options if mode_name == settings.mode else {})
    options = {k: v for k, v in options.items() if k != "mode"}
    semantics = settings.resolved_semantics
    prefix = _length(call.query, None) + (semantics == "delimited")
    lengths = [_length(i, None) for i in call.items]
    tokens = mode.num_tokens(prefix, lengths, options, semantics)
    if tokens > limits.max_tokens:
        raise BadRequest(f"runs {tokens} tokens through the model in mode {mode_name}, more "
                         f"than this server's --max-tokens {limits.max_tokens}: send fewer "
                         "or shorter items", "items", 413)
    shape = Shape(prefix, n, sum(lengths) / n, longest=max(lengths), model=model,
                  dtype=settings.dtype)
    parts, fits = mode.memory_fit(shape, options, limits.max_request_memory)
    if not fits:
        need = sum(parts.values())
        part = max(parts, key=parts.get)
        option = PART_OPTION.get(part)
        shown = ", ".join(f"{k} {gib(v)}" for k, v in sorted(parts.items(),
                                                               key=lambda kv: -kv[1])[:3])
        hint = " (mask segment needs no T x T scores)" if part == "attention scores" else ""
        raise BadRequest(f"needs an estimated {gib(need)} in mode {mode_name} ({shown}), more "
                         f"than this server's --max-request-memory "
                         f"{gib(limits.max_request_memory)}: send fewer or shorter items"
                         f"{hint}", f"mibench.{option}" if option else "items", 413)
    return parts


# ---- the body: its size and its time bounded ---------------------------------------------


async def read_body(request, limits: Limits) -> bytes:
    """The request's body, read while it arrives: Content-Length past `max_body` is 413
    before anything is read, a body (chunked or not) passing it is 413 at that byte, and a
    body that has not arrived within `body_timeout` is 408."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limits.max_body:
        raise BadRequest(f"is {int(length)} bytes (Content-Length), more than this server's "
                         f"--max-body {limits.max_body}", "body", 413)
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.body_timeout):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.max_body:
                    raise BadRequest(f"passed this server's --max-body {limits.max_body} "
                                     "bytes while arriving", "body", 413)
                chunks.append(chunk)
    except TimeoutError:
        raise BadRequest(f"did not arrive within this server's --body-timeout "
                         f"{limits.body_timeout:g} s ({size} bytes came)", "body", 408) from None
    return b"".join(chunks)


# ---- parsing: two threads, by the body's size -------------------------------------------

# bodies up to this size are parsed on a thread of their own: the most a body there costs
# to decode and tokenize (64 KiB of text, ~0.2 s with a byte-level tokenizer on a busy
# 2-core machine) is what a small request can wait behind each one ahead of it
LIGHT_BODY = 64 * 1024


class Parsers:
    """The two parsing threads (build_app): `lane(raw)` is the one for a body of that
    size."""

    def __init__(self):
        self.light = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibench-parse")
        self.heavy = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibench-parse-big")

    def lane(self, raw: bytes) -> ThreadPoolExecutor:
        return self.light if len(raw) <= LIGHT_BODY else self.heavy

    def shutdown(self, wait: bool = False, cancel_futures: bool = True) -> None:
        for pool in (self.light, self.heavy):
            pool.shutdown(wait=wait, cancel_futures=cancel_futures)


# ---- the scoring queue: one request at a time, a bounded number waiting -----------------


class ScoringQueue:
    """One scoring thread (the engine is not re-entrant) in arrival order; at most `bound`
    requests admitted and not yet answered (the one scoring included): past it, a
    BadRequest 503 naming --max-queue."""

    def __init__(self, bound: int):
        self.bound = bound
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mibench-score")
        self._live: set[Future] = set()  # admitted, not yet done
        self._lock = threading.Lock()

    @property
    def pending(self) -> int:
        return len(self._live)

    def submit(self, fn, *args) -> Future:
        with self._lock:
            if len(self._live) >= self.bound:
                raise BadRequest(f"this server has {len(self._live)} requests admitted and "
                                 "not yet answered, its --max-queue; try again later", None,
                                 503)
            try:
                future = self.pool.submit(fn, *args)
            except RuntimeError:  # shut down
                raise BadRequest("the server is stopping", None, 503) from None
            self._live.add(future)
        future.add_done_callback(self._done)  # scored, failed or cancelled while waiting
        return future

    def _done(self, future: Future) -> None:
        with self._lock:
            self._live.discard(future)

    def stop(self, wait_s: float) -> bool:
        """Cancel what waits, let the one scoring finish within `wait_s`; False when it
        is still scoring then."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            live = list(self._live)
        _, running = wait(live, timeout=wait_s)
        return not running


def out_of_memory(e: BaseException) -> bool:
    """An engine out of memory: MemoryError, or XLA's RESOURCE_EXHAUSTED."""
    return isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e)[:2000]

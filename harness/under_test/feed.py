"""The request bodies of an `engine: http` case, built as they are sent
(harness/under_test/requests_case.py): one thread draws request i's workload (seed
`workload.seed + i`; a JSONL workload: its request i, cycling; `same_query`: the first
one, built once) and encodes its body, at most AHEAD bodies ahead of the sends, so a
case's memory does not grow with its `requests:`.

The client side of a case holds, whatever `requests:` says: the bodies in flight (one per
client, or up to MAX_IN_FLIGHT in an open loop), AHEAD built ones, the one being built
with its workload (token ids as Python ints, about 36 bytes each), and a JSONL workload's
requests; what grows with `requests:` is one record per measured request (RECORD_BYTES
in memory, about 150 bytes in the artifact) and one count of its tokens. The sizes and
that estimate (`client_bytes`, which `mibench validate` adds to a case's memory) are in
harness/under_test/client_sizes.py.
"""

from __future__ import annotations

import dataclasses
import queue
import threading

from mibench.engines import MibenchError, TextBound
from mibench.workloads import Request, generate, materialize, total_tokens

from .client_sizes import AHEAD

_DONE = object()


@dataclasses.dataclass(frozen=True)
class Built:
    """Request `index`'s body, with its item and token counts."""

    index: int
    body: bytes
    items: int
    tokens: int


class Bodies:
    """Request i's body built on demand (`at(i)`), for `case` sent through `engine`'s wire
    (module docstring: which workload request i has)."""

    def __init__(self, case, engine):
        self.case, self.engine = case, engine
        self.labels, self.softmax = len(case.workload.label_token_ids), \
            case.workload.apply_softmax
        self.dtype, self.wire = case.dtype, engine.wire
        self._requests = _workloads(case, engine)
        self._same: Built | None = None

    def at(self, i: int) -> Built:
        if self.case.http.same_query and self._same is not None:
            return dataclasses.replace(self._same, index=i)
        w, plan = self.case.workload, self.case.http
        r = self._requests(i)
        body = self.wire.encode(list(r.query), [list(x) for x in r.items],
                                list(w.label_token_ids), w.apply_softmax, plan.served_model)
        built = Built(index=i, body=body, items=len(r.items),
                      tokens=total_tokens([r], w.delimiter))
        if self.case.http.same_query:
            self._same = built
        return built


class Feed:
    """`bodies` of requests `first` .. `first + count - 1` in order, built on a thread of
    its own at most AHEAD ahead: `take()` gives the next one (None when all are taken) to
    any thread; the builder's error is raised there."""

    def __init__(self, bodies: Bodies, first: int, count: int):
        self.bodies, self.first, self.end = bodies, first, first + count
        self._queue: queue.Queue = queue.Queue(AHEAD)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._build_all, daemon=True,
                                        name="mibench-http-bodies")
        self._thread.start()

    def _build_all(self) -> None:
        try:
            for i in range(self.first, self.end):
                if not self._put(self.bodies.at(i)):
                    return
        except BaseException as e:  # noqa: BLE001 - raised in the taking thread
            self._error = e
        self._put(_DONE)

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def take(self) -> Built | None:
        while True:
            try:
                item = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                if self._stop.is_set():
                    return None
        if item is _DONE:
            self._queue.put(_DONE)  # for the other takers
            if self._error is not None:
                raise self._error
            return None
        return item

    def close(self) -> None:
        self._stop.set()


def _workloads(case, engine):
    """Request i's workload as a function of i (module docstring)."""
    spec, plan, cfg = case.workload, case.http, engine.model_config
    if cfg is None:
        raise MibenchError(f"the vocabulary of {case.model} is unknown here, so no workload "
                           "can be generated for it: name a preset or a checkpoint folder",
                           field="model.path")
    vocab, exclude = cfg.vocab_size, engine.special_ids
    if spec.requests is not None:
        reqs = materialize(spec, vocab, exclude=exclude, tokenize=TextBound.of(engine))
        return lambda i: reqs[0 if plan.same_query else i % len(reqs)]
    if plan.same_query:
        first = generate(spec, vocab, exclude)
        return lambda i: first

    def drawn(i: int) -> Request:
        return generate(spec.replace(seed=spec.seed + i), vocab, exclude)

    return drawn

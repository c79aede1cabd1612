"""Engines and materialized workloads, built once and shared by the cases that need them."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable

from mibench.checks import check_scores
from mibench.errors import InvalidScores
from mibench.workloads import Request, WorkloadSpec, materialize

from ..config.cases import CaseSpec
from ..config.keys import EngineKey


def default_factory(name: str, model: str, dtype: str, tp: int, **server):
    """An engine factory: called with a key's engine, model, dtype and tp, and for an http
    engine its server's keywords (EngineKey.server_kwargs)."""
    from mibench.engines import load_engine

    return load_engine(name, model=model, dtype=dtype, tp=tp, **server)


class EnginePool:
    """One engine per (engine, model, dtype, tp). A load failure is remembered and re-raised
    for every case that needs the same engine, without retrying. `bind` turns a key into
    the one the engine is built with (a launched server's live address:
    harness/under_test/pool.py); the pool's own bookkeeping keeps the key it was given."""

    def __init__(self, factory: Callable | None = None,
                 bind: Callable[[EngineKey], EngineKey] | None = None):
        self.factory = factory or default_factory
        self.bind = bind or (lambda key: key)
        self._engines: dict[EngineKey, object] = {}
        self._failures: dict[EngineKey, BaseException] = {}
        self._requests: dict[tuple, list[Request]] = {}
        # engines whose runtime an untimed call has warmed (`warm_runtime`), before the
        # first resident-set rise measured with them
        self.warmed: set[EngineKey] = set()

    def get(self, key: EngineKey):
        if key in self._failures:
            raise self._failures[key]
        if key not in self._engines:
            try:
                self._engines[key] = self._build(self.bind(key))
            except Exception as e:
                self._failures[key] = e
                raise
        return self._engines[key]

    def _build(self, key: EngineKey):
        """The engine of `key` (bound), from the factory."""
        return self.factory(key.engine, key.model, key.dtype, key.tp, **key.server_kwargs())

    def release_unneeded(self, needed: set[EngineKey]) -> None:
        """Drop engines no later case or parity check needs, so their memory can go."""
        for key in [k for k in self._engines if k not in needed]:
            self.discard(key)

    def discard(self, key: EngineKey) -> None:
        """Forget (and close, where it can be closed) the engine of `key`: the next case
        that needs it builds a fresh one."""
        engine = self._engines.pop(key, None)
        self._requests = {k: v for k, v in self._requests.items() if k[0] != key}
        self.warmed.discard(key)
        if hasattr(engine, "close"):
            engine.close()

    def interrupted(self, key: EngineKey):
        """What an interrupted case measured (engines in worker processes keep it:
        harness/run/worker.py); in this process the interruption ended the case: None."""
        return None

    def close(self) -> None:
        for key in list(self._engines):
            self.discard(key)

    def requests(self, key: EngineKey, spec: WorkloadSpec) -> list[Request]:
        """The workload's token ids for this engine's model (vocabulary, special ids)."""
        cache_key = (key, spec)
        if cache_key not in self._requests:
            from mibench.engines import TextBound

            engine = self.get(key)
            self._requests[cache_key] = materialize(
                spec, engine.model_config.vocab_size, exclude=engine.special_ids,
                tokenize=TextBound.of(engine))
        return self._requests[cache_key]


@contextlib.contextmanager
def request_named(k: int):
    """An InvalidScores raised while scoring request k of a workload names the request."""
    try:
        yield
    except InvalidScores as e:
        raise of_request(k, e) from e


def of_request(k: int, e: InvalidScores) -> InvalidScores:
    return InvalidScores(f"request {k}: {e}")


def check_table(table: list, requests: list[Request], spec: WorkloadSpec, dtype: str) -> None:
    """The scores of a whole workload as they enter a record, whatever engine made them (a
    fake, another revision's engine under `mibench ab`): one row per item of each request,
    each passing `check_scores` (mibench/checks.py); an InvalidScores naming request and item."""
    if len(table) != len(requests):
        raise InvalidScores(f"scores for {len(table)} request(s), the workload has "
                            f"{len(requests)}")
    num_labels = len(spec.label_token_ids)
    for k, (rows, r) in enumerate(zip(table, requests, strict=True)):
        with request_named(k):
            if len(rows) != len(r.items) or any(len(row) != num_labels for row in rows):
                raise InvalidScores(f"expected {len(r.items)} item(s) x {num_labels} "
                                    "label(s) of scores")
            check_scores(rows, spec.apply_softmax, dtype, spec.label_token_ids)


def semantics_kw(spec: WorkloadSpec) -> dict:
    """`semantics` for `score` when the workload sets it; unset, the engine's default
    (delimited with a delimiter, else plain) applies."""
    return {} if spec.semantics is None else {"semantics": spec.semantics}


@dataclasses.dataclass(frozen=True)
class Scoring:
    """What a score call of a workload needs beside the engine and its requests, when no
    case holds it (parity's comparisons: a mode and options of an engine key); a CaseSpec
    has the same three fields."""

    workload: WorkloadSpec
    mode: str
    params: dict


def _call_args(requests: list[Request], case: CaseSpec | Scoring) -> tuple[list, list, dict]:
    """(token lists of each request, labels, the keyword arguments of a score call)."""
    prepared = [(list(r.query), [list(i) for i in r.items]) for r in requests]
    kwargs = dict(mode=case.mode, apply_softmax=case.workload.apply_softmax,
                  delimiter=case.workload.delimiter, **semantics_kw(case.workload),
                  **case.params)
    return prepared, list(case.workload.label_token_ids), kwargs


def batch_pass(engine, requests: list[Request], case: CaseSpec | Scoring) -> list[float] | None:
    """Each batch's wall seconds in one more pass over the workload, synced batch by batch
    (the engine's `batch_times`; prefill_extend's extend batches), request by request.
    None where the engine (torch, http, an older revision's) or the mode has no batches.
    Sync points change what is timed: run it after the timed runs, never among them."""
    timer = getattr(engine, "batch_times", None)
    if timer is None:
        return None
    prepared, labels, kwargs = _call_args(requests, case)
    out: list[float] = []
    for q, items in prepared:
        times = timer(q, items, labels, **kwargs)
        if times is None:
            return None
        out += times
    return out


def make_call(engine, requests: list[Request],
              case: CaseSpec | Scoring) -> Callable[[], list[list[list[float]]]]:
    """The one way the harness calls an engine on a workload: the returned call scores every
    request once (per request, one row per item; an InvalidScores names the request). A
    case's timed unit (harness/run/measure.py) and parity's score tables
    (`make_call(engine, requests, Scoring(spec, mode, options))()`) alike. Token lists are
    prepared here, outside the timed call."""
    prepared, labels, kwargs = _call_args(requests, case)

    def call():  # try/except, not `request_named`: free in the timed loop (Python 3.11+)
        out = []
        for k, (q, items) in enumerate(prepared):
            try:
                out.append(engine.score(q, items, labels, **kwargs).scores)
            except InvalidScores as e:
                raise of_request(k, e) from e
        return out

    return call


def warm_runtime(engine, requests: list[Request], case: CaseSpec) -> None:
    """One tiny untimed call (mode `single`: every in-process engine has it; the first
    request cut to 8 query tokens and one item of 2 tokens, one label), so a process's
    one-time costs (JAX's and XLA's runtime, compiler and code pages: about 100 MiB of
    resident set on a CPU) land here and not in the resident-set rise of the first case it
    measures (harness/host/memory.py). A failure is left to the case itself."""
    if not requests:
        return
    spec, r = case.workload, requests[0]
    items = [list(i[:2]) for i in r.items[:1]]
    try:
        engine.score(list(r.query[:8]), items, list(spec.label_token_ids[:1]),
                     mode="single", apply_softmax=spec.apply_softmax,
                     delimiter=spec.delimiter, **semantics_kw(spec))
    except Exception:  # noqa: BLE001 - the case's own calls will say what is wrong
        pass

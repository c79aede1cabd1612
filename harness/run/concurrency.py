"""The `concurrency` parity check: a server must give a request the same scores whatever
else it is doing. It needs no reference engine, only the server.

The same K requests (the parity workload drawn with seeds `seed + i`) are scored one at a
time, then again all in flight together, mixed with K other requests (seeds `seed + K +
i`) sent at the same moment, each on its own connection. Each request's scores under load
must equal its scores alone within the modes tolerance on log scores (1e-5 in float32;
DESIGN.md). A server that batches requests whose rows then interact, or whose batched
kernels round differently from its single-request ones, fails it; the check names the
requests and items that moved and by how much.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses

import numpy as np

from mibench.workloads import Request, WorkloadSpec, generate

REQUESTS = 8  # K: the requests compared; as many others are mixed in
SHOWN = 10  # moved scores named in the check's record, largest first


@dataclasses.dataclass(frozen=True)
class Moved:
    """Request `request`'s item `item` moved by `log_diff` (max over its labels)."""

    request: int
    item: int
    log_diff: float

    def line(self) -> str:
        return f"request {self.request} item {self.item}: |d log| {self.log_diff:.3g}"


def requests_of(spec: WorkloadSpec, vocab: int, exclude, n: int, first_seed: int
                ) -> list[Request]:
    """`n` requests of the parity workload, seeds `first_seed`, `first_seed + 1`, ..."""
    return [generate(spec.replace(seed=first_seed + i), vocab, exclude) for i in range(n)]


def score_alone(engine, spec: WorkloadSpec, requests: list[Request]) -> list[np.ndarray]:
    """Each request's scores, one request at a time."""
    return [_score(engine, spec, r) for r in requests]


def score_together(engine, spec: WorkloadSpec, requests: list[Request],
                   others: list[Request]) -> list[np.ndarray]:
    """Each request's scores with every request and every other one in flight at once
    (a thread each; the http engine keeps one connection per thread). The order of
    sending is interleaved: request 0, other 0, request 1, other 1, ..."""
    mixed = [x for pair in zip(requests, others, strict=True) for x in pair]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(mixed)) as pool:
        futures = [pool.submit(_score, engine, spec, r) for r in mixed]
        scores = [f.result() for f in futures]
    return scores[0::2]


def _score(engine, spec: WorkloadSpec, r: Request) -> np.ndarray:
    kw = {} if spec.semantics is None else {"semantics": spec.semantics}
    out = engine.score(list(r.query), [list(i) for i in r.items], list(spec.label_token_ids),
                       mode="single", apply_softmax=spec.apply_softmax,
                       delimiter=spec.delimiter, **kw)
    return np.asarray(out.scores, dtype=np.float64)


def moved(alone: list[np.ndarray], together: list[np.ndarray], tol: float) -> list[Moved]:
    """Every item whose log scores moved by more than `tol`, largest first."""
    tiny = np.finfo(np.float64).tiny
    out = []
    for i, (a, b) in enumerate(zip(alone, together, strict=True)):
        if a.shape != b.shape:
            raise ValueError(f"request {i}: {a.shape} scores alone, {b.shape} under load")
        d = np.abs(np.log(np.maximum(a, tiny)) - np.log(np.maximum(b, tiny))).max(axis=1)
        out += [Moved(i, int(j), float(d[j])) for j in np.flatnonzero(d > tol)]
    return sorted(out, key=lambda m: -m.log_diff)

"""Parity checks that scores cannot silently go wrong (docs/parity.md): `order`,
`duplicates` and `degenerate`, for every case of every engine and mode and for servers
(`engine: http`). Each is a property of one engine's scores, so none needs the reference.

- `order`: each request's items scored again in `PERMUTATIONS` seeded permutations; every
  item's scores, put back in place, must equal its scores in the original order: bitwise
  where the mode's batch invariance is bitwise (`Mode.batch_invariance`: one forward per
  item), else within the `modes` tolerance; a server within its case's `tolerance`.
- `duplicates`: item k (the middle one) of the first request, `x`, put in place of the
  first and the last item (the same item count, so a batching mode runs the programs it
  compiled for the request): each copy must score like its twin in the middle (`twin`) and
  like the item scored by itself (`alone`: the engine's `single` mode, one forward with no
  neighbours; a server: a request of the item alone), with the same tolerance as `order`.
- `degenerate`: a case whose items with distinct tokens all score the same (the smallest
  spread of a request's log scores at or below `SAME`), or whose scores are NaN, infinite or
  out of range, fails (`scores`: the scores the case recorded, on its own workload); and,
  on the parity workload, scores that do not move by more than `SAME` when every query
  token is changed fail (`query`). A single label under softmax (every score is 1) and
  requests whose items are all one (a constant workload) are `exempt`, saying so.

The checks score through `GroupParity` (harness/run/parity.py), which memoizes tables, so a
table two checks share is scored once. A mode that scores one item per forward (its batch
invariance bitwise: `single`) is checked on each request's first `PER_ITEM` items: its cost
grows with the items while the property does not depend on their count; the other modes
take the parity requests whole, whose programs their own scoring compiled already.
"""

from __future__ import annotations

import numpy as np

from mibench.checks import check_scores
from mibench.engines import MODES
from mibench.errors import InvalidScores
from mibench.workloads import Request

from ..case_kinds import kind_of
from ..config.matrix import CaseSpec
from ..records import CaseRecord, ParityCheck
from .tolerances import tolerances

PERMUTATIONS = 3  # seeded permutations of each request's items (`order`)
PER_ITEM = 4  # items a mode of one forward per item is checked on
# at or below this spread (max - min over a request's distinct items of a label's log score)
# the items "all score the same": float32 rounding moves a log score by ~1e-7, and the
# smallest spread of real items on the shipped configs is orders above it (docs/parity.md,
# "degenerate"); bfloat16's own rounding is 2**-8 (3.9e-3) of a score, so two bfloat16 scores
# closer than 1e-2 in log cannot be told apart from one score rounded twice
SAME = {"float32": 1e-5, "bfloat16": 1e-2}
SOFTMAX_ONE = "a single label under softmax: every score is 1, nothing to tell apart"
IDENTICAL = "every request's items are identical tokens: nothing to tell apart"


def tolerance_of(g, case: CaseSpec) -> tuple[float, float | None]:
    """(log tolerance, absolute tolerance or None) of `order` and `duplicates` for a case:
    0 (bitwise) where its mode's batch invariance is bitwise, a server's `tolerance`, else
    the modes tolerance of its dtype."""
    given = kind_of(case.engine).tolerance(case, g.spec.apply_softmax)
    if given is not None:
        return given, None
    if MODES[case.engine][case.mode].batch_invariance == "bitwise":
        return 0.0, None
    return tolerances("modes", case.dtype, g.spec.apply_softmax)


def requests_for(g, case: CaseSpec) -> tuple[list[Request], str]:
    """The requests the checks score for `case` and the memo tag of their scores: the
    parity requests, or their first PER_ITEM items for a mode of one forward per item."""
    reqs = g.requests(case.engine_key)
    if MODES[case.engine][case.mode].batch_invariance != "bitwise":
        return reqs, ""
    return [Request(query=r.query, items=r.items[:PER_ITEM]) for r in reqs], "per-item"


def permuted(requests: list[Request], seed: int, p: int) -> tuple[list[Request], list[int]]:
    """Permutation `p` of every request's items (0: reversed; others seeded by `seed` and
    `p`, never the identity) and, over the flat rows, where each permuted row came from."""
    rng = np.random.default_rng([seed, p])
    out, origin, offset = [], [], 0
    for r in requests:
        n = len(r.items)
        order = list(range(n))[::-1]
        while p and n > 1:
            order = rng.permutation(n).tolist()
            if order != list(range(n)):
                break
        out.append(Request(query=r.query, items=tuple(r.items[j] for j in order)))
        origin += [offset + j for j in order]
        offset += n
    return out, origin


def order(g, case: CaseSpec) -> ParityCheck:
    """The `order` check of one case (module docstring)."""
    key, (reqs, tag) = case.engine_key, requests_for(g, case)
    tol, abs_tol = tolerance_of(g, case)
    base = lambda: g.score(key, case.mode, case.params, reqs, tag)  # noqa: E731

    def back_in_place():
        rows = []
        for p in range(PERMUTATIONS):
            perm, origin = permuted(reqs, g.spec.seed, p)
            got = g.score(key, case.mode, case.params, perm, f"order{p}{tag}")
            table = [None] * len(got)
            for row, o in zip(got, origin, strict=True):
                table[o] = row
            rows += table
        return rows

    check = g.compare("order", case, f"{case.case_id}, items in {PERMUTATIONS} seeded "
                      "permutations", case.dtype, back_in_place,
                      lambda: base() * PERMUTATIONS, tol=(tol, abs_tol))
    check.permutations = PERMUTATIONS
    return check


def duplicates(g, case: CaseSpec) -> list[ParityCheck]:
    """The `duplicates` check of one case: `twin` and `alone` (module docstring)."""
    key, (reqs, tag) = case.engine_key, requests_for(g, case)
    tol = tolerance_of(g, case)
    r = reqs[0]
    n = len(r.items)
    k = n // 2
    x = r.items[k]
    # x in place of the first and last item; with fewer than 3 items, around them
    items = (x, *r.items[1:-1], x) if n >= 3 else (x, *r.items, x)
    where = [0, k, len(items) - 1] if n >= 3 else [0, k + 1, len(items) - 1]
    how = "in place of the first and last item" if n >= 3 else "first and last"
    repeated = [Request(query=r.query, items=items)]
    alone = [Request(query=r.query, items=(x,))]
    copies = lambda: g.score(key, case.mode, case.params, repeated,  # noqa: E731
                             f"duplicates{tag}")
    one = lambda: g.score(key, "single", {}, alone, f"alone{tag}")  # noqa: E731 - by itself
    first, mid, last = where
    return [
        g.compare("duplicates", case, f"item {k} repeated {how}: its twin in place",
                  case.dtype, lambda: [copies()[first], copies()[last]],
                  lambda: [copies()[mid]] * 2, variant="twin", tol=tol),
        g.compare("duplicates", case, f"item {k} alone ({case.engine}/single)", case.dtype,
                  lambda: [copies()[i] for i in where], lambda: one() * 3, variant="alone",
                  tol=tol)]


def query_moves(g, case: CaseSpec, vocab: int) -> ParityCheck:
    """`degenerate`, variant `query`: every query token changed, the scores must move by
    more than `SAME` (an engine that ignores the query does not)."""
    key, (reqs, tag) = case.engine_key, requests_for(g, case)
    same = SAME[_dtype(case.dtype)]
    against = "the same items after another query (every query token changed)"
    if len(g.spec.label_token_ids) == 1 and g.spec.apply_softmax:
        return _exempt(case.case_id, "query", against, same, SOFTMAX_ONE)
    d = g.spec.delimiter
    other = [Request(query=tuple(_other(t, d, vocab) for t in r.query), items=r.items)
             for r in reqs]
    check = g.compare("degenerate", case, against, case.dtype,
                      lambda: g.score(key, case.mode, case.params, other, f"query{tag}"),
                      lambda: g.score(key, case.mode, case.params, reqs, tag), variant="query",
                      tol=(same, None))
    if check.status == "error":
        return check
    moved = check.max_log_diff is not None and check.max_log_diff > same
    check.status = "passed" if moved and check.error is None else "failed"
    if not moved:
        check.error = (f"the scores moved by at most {check.max_log_diff:.3g} in log when "
                       f"every query token changed (at most {same:g}): the query is ignored")
    return check


def _other(t: int, delimiter: int | None, vocab: int) -> int:
    """Another token than `t`, never the delimiter (isolation's mutation)."""
    u = (t + 1) % vocab
    return u if u != delimiter else (t + 2) % vocab


def case_scores(rec: CaseRecord, requests: list[Request] | None, spec, dtype: str
                ) -> ParityCheck:
    """`degenerate`, variant `scores`: the scores the case recorded (module docstring);
    `requests`: its workload's requests (None: they could not be made)."""
    same = SAME[_dtype(dtype)]
    against = "its own scores: items with distinct tokens"
    base = dict(check="degenerate", variant="scores", case_id=rec.case_id, against=against,
                tolerance=same)
    if rec.status == "failed" and rec.error is not None and rec.error.type == "InvalidScores":
        return ParityCheck(**base, status="failed", error=f"{rec.error.message}")
    if rec.scores is None or requests is None:
        return ParityCheck(**base, status="error", error="the case recorded no scores")
    table = rec.scores
    try:
        for k, rows in enumerate(table):
            try:
                check_scores(rows, spec.apply_softmax, dtype, spec.label_token_ids)
            except InvalidScores as e:
                raise InvalidScores(f"request {k}: {e}") from e
    except InvalidScores as e:
        return ParityCheck(**base, status="failed", error=str(e))
    if len(spec.label_token_ids) == 1 and spec.apply_softmax:
        return _exempt(rec.case_id, "scores", against, same, SOFTMAX_ONE)
    spreads = []
    for k, (rows, r) in enumerate(zip(table, requests, strict=False)):
        if len(rows) != len(r.items):
            return ParityCheck(**base, status="error", error=f"request {k}: {len(rows)} "
                               f"score rows for {len(r.items)} items")
        distinct = {tuple(item): i for i, item in enumerate(r.items)}
        if len(distinct) > 1:
            spreads.append(_spread([rows[i] for i in distinct.values()]))
    if not spreads:
        return _exempt(rec.case_id, "scores", against, same, IDENTICAL)
    spread = min(spreads)
    check = ParityCheck(**base, spread=spread, status="passed" if spread > same else "failed")
    if spread <= same:
        k = spreads.index(spread)
        check.error = (f"request {k}: its items with distinct tokens all score the same (log "
                       f"scores within {spread:.3g}, at most {same:g})")
    return check


def _spread(rows: list[list[float]]) -> float:
    """The largest spread of one label's log scores over `rows` (0 scores count as the
    smallest float64, as parity's `diff` does)."""
    tiny = np.finfo(np.float64).tiny
    logs = np.log(np.maximum(np.asarray(rows, dtype=np.float64), tiny))
    return float((logs.max(axis=0) - logs.min(axis=0)).max())


def _exempt(case_id: str, variant: str, against: str, tol: float, why: str) -> ParityCheck:
    return ParityCheck(check="degenerate", variant=variant, case_id=case_id, against=against,
                       tolerance=tol, status="exempt", exempt=why)


def _dtype(dtype: str) -> str:
    return dtype if dtype in SAME else "float32"

"""Batch invariance of mibench's own engines, measured (docs/parity.md, "Batch
invariance"): for every mode, an item scored alone against the same item among others in
the mode's own batching, and a request scored alone against the same request while
`mibench serve` handles others; each with two negative controls that show the measurement
can fail.

    mibench job invariance [--out DIR]

For each variant (a mode with options: each mode's `invariance` rows in the mode registry,
engines/modes/registry.py, gathered in `VARIANTS`) the target item x (3 tokens) is scored
alone, then at each placement (n items, x at position k; the others 2 to 6 tokens long, so
packed layouts, chunk shapes, extend batches and their padding buckets all change with
the placement). `alone_vs_among` is the largest |ln a - ln b| over those placements. The
stated property of each variant (`CLAIMS`) is `bitwise` (0 exactly) or `<= 1e-5` (the
float32 modes tolerance); the job and its test (tests/test_invariance.py) check it.

Controls, at the largest placement:
- `neighbour_same`: one neighbour of x replaced by other tokens of the same length: x's
  scores must not change at all (0: nothing of a neighbour reaches x); `neighbour_len`:
  the neighbour one token longer: within the tolerance;
- `leak`: the same alone-versus-among measurement with a deliberate leak switched on,
  which must exceed the tolerance (caught): for the packed and chunked modes a leaking mask
  (dense: item rows see every earlier token; segment: every item's segment starts at the
  item region's start), for prefill_extend a leak across the items' rows (each item's last
  hidden state moved by 1% of the mean over the rows its LM head pass joins), for the modes
  without a mask or batch (single, torch) scores that move with the other items.

The serve rows launch `mibench serve --mode M` and run the `concurrency` check's passes
(harness/under_test/concurrency.py: alone, under load twice, alone again) with two different sets
of other requests; their leak control is a server whose scores move with the requests in
flight (`python -m mibench.harness.testing.fake_server --inflight-shift`), which must fail
the same check.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mibench.engines import MODES

from ..judge.tolerances import TOL as TOLERANCES
from .outputs import save

TOL = TOLERANCES["modes"]["float32"]  # the float32 `modes` tolerance on log scores
DELIM, LABELS = 151643, [198, 9834]
QUERY_LEN, X_LEN = 24, 3


@dataclasses.dataclass(frozen=True)
class Variant:
    engine: str
    mode: str
    options: dict
    placements: tuple[tuple[int, int], ...]  # (items, position of x)
    batching: str  # what the placements vary, in words
    leak: str  # the leak control's kind (LEAKS)


def options_label(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items())


# every measured mode of every engine, each of its `Mode.invariance` rows (in the
# registry's order), so a new mode or engine is measured where it is declared
VARIANTS = tuple(Variant(engine, name, row.options, row.placements, row.batching, row.leak)
                 for engine, modes in MODES.items() for name, mode in modes.items()
                 for row in mode.invariance)
# the stated property of each variant: bitwise, or within TOL (measured: docs/parity.md):
# the mode registry's `Mode.batch_invariance`, which parity's order and duplicates checks
# judge by too
CLAIMS = {(v.engine, v.mode, options_label(v.options)): MODES[v.engine][v.mode].batch_invariance
          for v in VARIANTS}


@dataclasses.dataclass
class Row:
    engine: str
    mode: str
    options: str
    batching: str
    claim: str  # bitwise | tolerance
    alone_vs_among: float  # max |d ln score| over the placements
    neighbour_same: float
    neighbour_len: float
    leak_kind: str
    leak: float
    holds: bool  # the claim held, the neighbour controls held and the leak was caught

    def verdict(self) -> str:
        return "holds" if self.holds else "DOES NOT HOLD"


def request(seed: int = 0, n: int = 13) -> tuple[list[int], list[int], list[list[int]]]:
    """(query, x, neighbours): random token ids below the delimiter."""
    rng = np.random.default_rng(seed)
    query = rng.integers(0, 150000, QUERY_LEN).tolist()
    x = rng.integers(0, 150000, X_LEN).tolist()
    others = [rng.integers(0, 150000, int(rng.integers(2, 7))).tolist() for _ in range(n)]
    return query, x, others


def placed(x: list[int], others: list[list[int]], n: int, k: int) -> list[list[int]]:
    """n items with x at position k, the rest from `others` in order."""
    rest = others[:n - 1]
    return rest[:k] + [x] + rest[k:]


def log_diff(a, b) -> float:
    tiny = np.finfo(np.float64).tiny
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(np.log(np.maximum(a, tiny)) - np.log(np.maximum(b, tiny))).max())


def scorer(engine, v: Variant) -> Callable[[list[int], list[list[int]]], np.ndarray]:
    def score(query, items):
        out = engine.score(query, items, LABELS, mode=v.mode, apply_softmax=False,
                           delimiter=DELIM, semantics="delimited", **v.options)
        return np.asarray(out.scores, np.float64)
    return score


def alone_vs_among(score, query, x, others, placements) -> float:
    alone = score(query, [x])[0]
    return max(log_diff(alone, score(query, placed(x, others, n, k))[k])
               for n, k in placements)


def measure(engine, v: Variant, seed: int = 0) -> Row:
    """One variant's row (module docstring)."""
    query, x, others = request(seed)
    score = scorer(engine, v)
    among = alone_vs_among(score, query, x, others, v.placements)
    n, k = max(v.placements)
    items = placed(x, others, n, k)
    j = k - 1 if k > 0 else k + 1  # a neighbour of x
    same = [list(i) for i in items]
    same[j] = [(t + 1) % 150000 for t in items[j]]
    longer = [list(i) for i in items]
    longer[j] = items[j] + items[j][:1]
    base = score(query, items)[k]
    neighbour_same = log_diff(base, score(query, same)[k])
    neighbour_len = log_diff(base, score(query, longer)[k])
    from mibench.engines import leaking

    with leaking(v.leak, engine):
        leak = alone_vs_among(score, query, x, others, v.placements)
    claim = CLAIMS[(v.engine, v.mode, options_label(v.options))]
    bound = 0.0 if claim == "bitwise" else TOL
    holds = among <= bound and neighbour_same == 0.0 and neighbour_len <= TOL and leak > TOL
    return Row(v.engine, v.mode, options_label(v.options), v.batching, claim, among,
               neighbour_same, neighbour_len, v.leak, leak, holds)


def engines(model: str = "embedded:tiny") -> dict:
    """Every engine a variant scores on, loaded once."""
    from mibench.engines import load_engine

    return {name: load_engine(name, model=model, dtype="float32")
            for name in dict.fromkeys(v.engine for v in VARIANTS)}


def main(out: Path | None = None, model: str = "embedded:tiny",
         more: Callable[[str], list[Row]] | None = None) -> dict:
    """Every variant's row and `more(model)`'s (the serve rows, from the servers-under-test
    wing: under_test/jobs/invariance_serve.py), as JSON and a Markdown table in `out`."""
    built = engines(model)
    rows = [measure(built[v.engine], v) for v in VARIANTS]
    rows += more(model) if more is not None else []
    result = {"model": model, "tolerance": TOL, "rows": [dataclasses.asdict(r) for r in rows],
              "all_hold": all(r.holds for r in rows)}
    save(out, "invariance", result, markdown(rows))
    print(markdown(rows))
    return result


def markdown(rows: list[Row]) -> str:
    head = ("| engine | mode | options | batching varied | stated | alone vs among | "
            "neighbour changed (same length) | neighbour one longer | leak control | "
            "leak caught | verdict |\n|---|---|---|---|---|---:|---:|---:|---|---:|---|")
    body = [f"| {r.engine} | {r.mode} | {r.options or '-'} | {r.batching} | "
            f"{'bitwise' if r.claim == 'bitwise' else f'<= {TOL:g}'} | {r.alone_vs_among:.2g} | "
            f"{r.neighbour_same:.2g} | {r.neighbour_len:.2g} | {r.leak_kind} | {r.leak:.2g} | "
            f"{r.verdict()} |" for r in rows]
    return "\n".join([head, *body])

"""The parity checks that scores cannot silently go wrong, on every engine and mode, each
beside the fault it must catch (docs/parity.md, "order, duplicates, degenerate,
prefix_cache"):

    mibench job score-checks [--out DIR] [--no-servers]

For each variant of the invariance job (harness/jobs/invariance.py `VARIANTS`: every mode
of every engine scored in this process, with the options whose batching differs) and, with
servers, the rows `more` adds (`mibench serve` in each mode and the fake server's prefix
cache: the servers-under-test wing's harness/under_test/jobs/score_checks_serve.py):
`order`, `duplicates` (twin, alone) and `degenerate` (scores, query) run through the same
functions as a run's parity (harness/run/invariants.py, run/parity.py) on a small workload
of their own (a 24-token query, 8 items of 2 to 6 tokens, labels 198 and 9834 after
delimiter 151643, float32, `embedded:tiny`), then again with the fault each must catch
switched on (engines/leaks.py): items whose scores move with their position (`item order`),
a repeated item scored differently (`repeated item`), every item given the first item's
scores (`same scores`), the query replaced (`query ignored`). For servers the faults are
switched on in the http engine (what comes back from the server). `prefix_cache` runs on
the fake server (harness/testing/fake_server.py) with a harmless cache, its control its
`--cache-off` launch, and is caught with `--warm-shift`. Each row holds the check's largest
difference (`order`, `duplicates`: |d ln score|; `degenerate`, scores: the smallest spread
of distinct items; query: how far the scores moved), its verdict, the fault and what the
check measured with it, and whether it was caught (failed).
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

from .invariance import DELIM, LABELS, VARIANTS, engines, options_label
from .outputs import save

MODEL = "embedded:tiny"
# each check's fault (engines/leaks.py), the control it must catch
FAULTS = {"order": "item order", "duplicates": "repeated item",
          "degenerate/scores": "same scores", "degenerate/query": "query ignored"}
WORKLOAD = {"query_tokens": 24, "num_items": 8, "item_tokens": {"min": 2, "max": 6},
            "label_token_ids": LABELS, "delimiter": DELIM, "apply_softmax": False,
            "seed": 0}


@dataclasses.dataclass
class Row:
    engine: str
    mode: str
    options: str
    check: str  # check/variant
    stated: str  # the tolerance (bitwise, <= x) or the threshold (> x)
    measured: float | None
    status: str
    fault: str
    fault_measured: float | None
    fault_status: str

    @property
    def caught(self) -> bool:
        return self.fault_status == "failed"

    @property
    def holds(self) -> bool:
        return self.status in ("passed", "exempt") and self.caught


def engine_cases() -> list[dict]:
    return [{"engine": v.engine, "mode": v.mode, **v.options} for v in VARIANTS]


def config(cases: list[dict], folder: Path, checks: list[str]):
    from ..config import load_config

    text = json.dumps({"name": "score-checks", "model": {"path": MODEL, "dtype": "float32"},
                       "workload": WORKLOAD, "cases": cases,
                       "parity": {"checks": checks}})  # JSON is YAML
    path = folder / "score-checks.yaml"
    path.write_text(text + "\n")
    return load_config(path)


def measure_case(case, pool, spec, servers=None) -> list[Row]:
    """The rows of one case: each check, then each again with its fault on; `servers`: the
    ServerPool of a launched server's case (its rows are named by their caller)."""
    from mibench.engines import leaking

    from ..run.parity import GroupParity

    ref = {"engine": "torch", "mode": "single", "dtype": "float32"}
    fresh = lambda: GroupParity(pool, spec, ref, servers=servers)  # noqa: E731 - new memo
    engine = pool.get(case.engine_key)
    rows = []
    for name, run in CHECKS.items():
        clean = run(fresh(), case)
        with leaking(FAULTS[name], engine):
            faulty = run(fresh(), case)
        for c, f in zip(clean, faulty, strict=True):
            rows.append(Row(case.engine, case.mode, options_label(case.params), _name(c),
                            _stated(c), _measure(c), c.status, FAULTS[name], _measure(f),
                            f.status))
    return rows


def _order(g, case) -> list:
    from ..run import invariants

    return [invariants.order(g, case)]


def _duplicates(g, case) -> list:
    from ..run import invariants

    return invariants.duplicates(g, case)


def _own_scores(g, case) -> list:
    """`degenerate` (scores) of the scores the case makes of its own workload."""
    from ..records import CaseRecord
    from ..run import invariants

    reqs = g.pool.requests(case.engine_key, case.workload)
    rec = CaseRecord.started(case)
    rec.scores = [g.score(case.engine_key, case.mode, case.params, reqs, "own")]
    return [invariants.case_scores(rec, reqs, case.workload, case.dtype)]


def _query(g, case) -> list:
    from ..run import invariants

    vocab = g.pool.get(case.engine_key).model_config.vocab_size
    return [invariants.query_moves(g, case, vocab)]


CHECKS = {"order": _order, "duplicates": _duplicates, "degenerate/scores": _own_scores,
          "degenerate/query": _query}


def _name(c) -> str:
    return f"{c.check}/{c.variant}" if c.variant else c.check


def _stated(c) -> str:
    if c.check == "degenerate":
        return f"> {c.tolerance:g}"
    return "bitwise" if c.tolerance == 0 else f"<= {c.tolerance:g}"


def _measure(c) -> float | None:
    return c.spread if c.variant == "scores" else c.max_log_diff


def main(out: Path | None = None,
         more: Callable[[Path, object], list[Row]] | None = None) -> dict:
    """Every row (module docstring) and `more(folder, spec)`'s (the servers' rows, in a
    scratch `folder`, on the parity workload `spec`: under_test/jobs/score_checks_serve.py),
    as JSON and a Markdown table in `out`."""
    from ..config import expand
    from ..run.parity import parity_workload
    from ..run.pool import EnginePool

    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        cfg = config(engine_cases(), folder, ["order", "duplicates", "degenerate"])
        built = engines(MODEL)
        pool = EnginePool(lambda name, model, dtype, tp: built[name])
        spec = parity_workload(cfg)
        for case in expand(cfg):
            rows += measure_case(case, pool, spec)
        rows += more(folder, spec) if more is not None else []
    result = {"model": MODEL, "workload": WORKLOAD,
              "rows": [dataclasses.asdict(r) | {"caught": r.caught} for r in rows],
              "all_hold": all(r.holds for r in rows)}
    save(out, "score-checks", result, markdown(rows))
    print(markdown(rows))
    return result


def markdown(rows: list[Row]) -> str:
    head = ("| engine | mode | options | check | stated | largest difference | verdict | "
            "fault (control) | with the fault | caught |\n"
            "|---|---|---|---|---|---:|---|---|---:|---|")
    body = [f"| {r.engine} | {r.mode} | {r.options or '-'} | {r.check} | {r.stated} | "
            f"{_num(r.measured)} | {r.status} | {r.fault} | {_num(r.fault_measured)} | "
            f"{'yes' if r.caught else '**NO**'} |" for r in rows]
    return "\n".join([head, *body])


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.2g}"

"""Scores that cannot silently go wrong (docs/parity.md; harness/run/invariants.py): parity's
`order`, `duplicates` and `degenerate` pass on mibench's engines, every mode, bitwise where
the mode's batch invariance is bitwise, and each catches the fault it is for (engines/
leaks.py): scores that move with an item's position, a repeated item scored differently,
every item given the same scores, a query that changes nothing. Exemptions say why."""

from __future__ import annotations

import numpy as np
import pytest

from mibench.engines import leaking
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand
from mibench.harness.records import CaseRecord, ErrorInfo
from mibench.harness.run import invariants, parity
from mibench.harness.run.pool import EnginePool
from mibench.harness.testing import write_config
from mibench.workloads import Request

CONFIG = """
    name: score-invariants
    model: {path: "embedded:tiny", dtype: float32}
    workload: {query_tokens: 24, num_items: 6, item_tokens: {dist: uniform, min: 2, max: 5},
               label_token_ids: [198, 9834], delimiter: 151643, apply_softmax: false, seed: 0}
    cases:
      - {engine: jax, mode: single}
      - {engine: jax, mode: packed, mask: segment}
      - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
      - {engine: torch, mode: single}
    # the reference case itself is left out of order and duplicates: a bfloat16 reference
    # (which no check here scores) keeps torch single in them
    parity: {reference: {engine: torch, mode: single, dtype: bfloat16},
             checks: [order, duplicates, degenerate]}
"""
SINGLE, PACKED = "jax/single/tp=1", "jax/packed/mask=segment/tp=1"
EXTEND, TORCH = "jax/prefill_extend/extend_batch_size=4/tp=1", "torch/single/tp=1"


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    return write_config(tmp_path_factory.mktemp("c"), CONFIG)


@pytest.fixture(scope="module")
def config(path):
    return load_config(path, [])


def checks_of(config, jax_engine, torch_engine, fault: str | None = None):
    """The parity record of the config's cases, each case's own scores recorded as a run
    would (`fault` switched on in both engines for everything)."""
    engines = {"jax": jax_engine, "torch": torch_engine}
    pool = EnginePool(lambda name, model, dtype, tp: engines[name])
    record = parity.new_record(config)
    with leaking(fault, jax_engine) if fault else _nothing(), \
            leaking(fault, torch_engine) if fault else _nothing():
        records = [own_record(pool, case) for case in expand(config)]
        parity.check_group(config, pool, expand(config), record, records)
    return {(c.check, c.variant, c.case_id): c for c in record.checks}, record


def own_record(pool, case) -> CaseRecord:
    """A case's record with the scores of its own workload (what a run keeps)."""
    from mibench.harness.run.pool import Scoring, make_call

    reqs = pool.requests(case.engine_key, case.workload)
    rec = CaseRecord.started(case)
    rec.scores = make_call(pool.get(case.engine_key), reqs,
                           Scoring(case.workload, case.mode, case.params))()
    return rec


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


@pytest.fixture(scope="module")
def clean(config, jax_tiny, torch_tiny):
    return checks_of(config, jax_tiny, torch_tiny)


@pytest.mark.slow
def test_every_check_passes_on_every_mode_bitwise_where_stated(clean):
    checks, record = clean
    assert record.passed, [c for c in checks.values() if not c.passing]
    for case in (SINGLE, PACKED, EXTEND, TORCH):
        for check, variant in (("order", None), ("duplicates", "twin"),
                               ("duplicates", "alone"), ("degenerate", "scores"),
                               ("degenerate", "query")):
            assert (check, variant, case) in checks, (check, variant, case)
    for case in (SINGLE, TORCH):  # one forward per item: bitwise
        for check, variant in (("order", None), ("duplicates", "twin"),
                               ("duplicates", "alone")):
            c = checks[(check, variant, case)]
            assert c.tolerance == 0.0 and c.max_log_diff == 0.0 and c.max_abs_diff == 0.0
    for case in (PACKED, EXTEND):  # another layout: within the modes tolerance
        c = checks[("order", None, case)]
        assert c.tolerance == parity.TOL["modes"]["float32"] and c.max_log_diff <= c.tolerance
        assert c.permutations == invariants.PERMUTATIONS
    for case in (SINGLE, PACKED, EXTEND, TORCH):  # real items are far apart, and so queries
        assert checks[("degenerate", "scores", case)].spread > 0.1
        assert checks[("degenerate", "query", case)].max_log_diff > 0.1


@pytest.mark.slow
@pytest.mark.parametrize("fault, check, variant", [
    ("item order", "order", None),
    ("repeated item", "duplicates", "twin"),
    ("scores", "duplicates", "alone"),  # an item's scores move with the item count
    ("same scores", "degenerate", "scores"),
    ("query ignored", "degenerate", "query"),
])
def test_each_fault_is_caught_by_its_check(path, jax_tiny, torch_tiny, fault, check,
                                           variant):
    config = load_config(path, [f"parity.checks=[{check}]"])
    checks, record = checks_of(config, jax_tiny, torch_tiny, fault)
    assert not record.passed
    for case in (SINGLE, PACKED, EXTEND, TORCH):
        c = checks[(check, variant, case)]
        assert c.status == "failed", (fault, case, c)
        if check != "degenerate":
            assert c.max_log_diff > 10 * parity.TOL["modes"]["float32"]
    if fault == "same scores":
        c = checks[("degenerate", "scores", PACKED)]
        assert c.spread == 0.0 and "all score the same" in c.error
    if fault == "query ignored":
        assert "the query is ignored" in checks[("degenerate", "query", EXTEND)].error


@pytest.mark.slow
def test_a_leak_between_items_fails_order_too(path, jax_tiny, torch_tiny):
    """A mask that lets packed items see each other (a real engine bug, no harness
    patching) fails `order` for packed: moving an item moves what it sees."""
    config = load_config(path, ["parity.checks=[order]"])
    checks, _ = checks_of(config, jax_tiny, torch_tiny, "segment mask")
    assert checks[("order", None, PACKED)].status == "failed"
    assert checks[("order", None, SINGLE)].status == "passed"


def _rec(case_id="c", scores=None, status="ok", error=None):
    from mibench.harness.records import ModelRef, RunsRecord, TopologyRecord, WorkloadRecord

    return CaseRecord(case_id=case_id, engine="jax", mode="single", params={},
                      model=ModelRef(path="embedded:tiny", dtype="float32"),
                      topology=TopologyRecord(tp=1),
                      workload=WorkloadRecord(query_tokens=4, num_items=2, item_tokens=2,
                                              label_token_ids=[1]),
                      runs=RunsRecord(warmup=0, timed=1), status=status, error=error,
                      started_at="now", scores=scores)


def _spec(labels=(1, 2), softmax=False):
    from mibench.workloads import WorkloadSpec

    return WorkloadSpec(query_tokens=4, num_items=3, item_tokens=2, label_token_ids=labels,
                        apply_softmax=softmax, seed=0)


REQ = [Request(query=(5, 6, 7, 8), items=((1, 2), (3, 4), (5, 6)))]


def test_degenerate_scores_judge_and_exemptions():
    good = [[[1e-5, 2e-5], [3e-5, 1e-5], [2e-6, 4e-5]]]
    c = invariants.case_scores(_rec(scores=good), REQ, _spec(), "float32")
    assert c.status == "passed" and c.spread == pytest.approx(np.log(3e-5 / 2e-6))
    same = [[[1e-5, 2e-5]] * 3]
    c = invariants.case_scores(_rec(scores=same), REQ, _spec(), "float32")
    assert c.status == "failed" and c.spread == 0.0 and "request 0" in c.error
    # float32 rounding is not a difference: within SAME the items are one score
    near = [[[1e-5, 2e-5], [1e-5 * (1 + 1e-7), 2e-5], [1e-5, 2e-5 * (1 - 1e-7)]]]
    assert invariants.case_scores(_rec(scores=near), REQ, _spec(), "float32").status \
        == "failed"
    rec = _rec(scores=good)  # a record refuses NaN; scores that reach the check may not
    rec.scores = [[[1e-5, float("nan")], [3e-5, 1e-5], [2e-6, 4e-5]]]
    c = invariants.case_scores(rec, REQ, _spec(), "float32")
    assert c.status == "failed" and "not a finite probability" in c.error
    over = [[[1.5, 0.0], [3e-5, 1e-5], [2e-6, 4e-5]]]
    assert "not a probability" in invariants.case_scores(
        _rec(scores=over), REQ, _spec(), "float32").error
    # exempt, saying why: one label under softmax (every score 1), identical items
    ones = [[[1.0]] * 3]
    c = invariants.case_scores(_rec(scores=ones), REQ, _spec((1,), True), "float32")
    assert c.status == "exempt" and "single label under softmax" in c.exempt and c.passing
    twins = [Request(query=(5, 6, 7, 8), items=((2, 2),) * 3)]
    c = invariants.case_scores(_rec(scores=same), twins, _spec(), "float32")
    assert c.status == "exempt" and "identical" in c.exempt
    # a case that failed for invalid scores fails degenerate too; no scores is an error
    failed = _rec(status="failed", error=ErrorInfo(type="InvalidScores", message="request 0: "
                                                   "item 1: score 0 is nan", traceback=""))
    c = invariants.case_scores(failed, None, None, "float32")
    assert c.status == "failed" and "item 1" in c.error
    assert invariants.case_scores(_rec(), REQ, _spec(), "float32").status == "error"


def test_permutations_are_seeded_and_put_back_in_place():
    reqs = [Request(query=(1,), items=((1,), (2,), (3,), (4,))),
            Request(query=(2,), items=((5,), (6,)))]
    perm, origin = invariants.permuted(reqs, 0, 0)
    assert perm[0].items == ((4,), (3,), (2,), (1,)) and origin[:4] == [3, 2, 1, 0]
    again = invariants.permuted(reqs, 0, 1)
    assert again == invariants.permuted(reqs, 0, 1)  # seeded
    flat = [i for r in reqs for i in r.items]
    got = [i for r in again[0] for i in r.items]
    assert all(flat[o] == g for o, g in zip(again[1], got, strict=True))


FAKE_CACHE = """
    name: prefix
    model: {path: "embedded:tiny", dtype: float32}
    workload: {query_tokens: 16, num_items: 3, item_tokens: 2, label_token_ids: [10, 20],
               apply_softmax: true, seed: 0}
    runs: {timeout_s: 600}
    cases:
      - engine: http
        launch:
          name: fake
          command: ["{python}", "-m", "mibench.harness.testing.fake_server", "{port}",
                    "--warm-shift", "SHIFT"]
          ready: {path: /get_server_info, timeout_s: 60}
          stop: {grace_s: 2}
        clients: 1
        requests: 2
        prefix_cache: {trials: 2, cache_off: {cache_off: true}}
    parity: {checks: [prefix_cache, order, duplicates, degenerate]}
"""


@pytest.mark.slow
@pytest.mark.parametrize("shift", [0.0, 0.05])
def test_prefix_cache_catches_warm_answers_that_move_beside_its_control(tmp_path, shift):
    """The fake server's "cache" moves a warm request's scores by `shift` in log (0: a
    cache that changes nothing); its control, the same server launched with --cache-off,
    moves nothing: the check fails 2 of 2 trials and says the cache is to blame."""
    from mibench.harness.run.plan import plan_of
    from mibench.harness.run.runner import run

    path = write_config(tmp_path, FAKE_CACHE.replace("SHIFT", str(shift)))
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False))
    (check,) = [c for c in record.parity.checks if c.check == "prefix_cache"]
    assert check.control.server_args == {"cache_off": True}
    assert check.control.fails == 0 and len(check.control.trials) == 2
    assert len(check.trials) == 2 and all(t.startup_s for t in check.trials)
    # requests 2 and 4 share the queries of 1 and 3: cold, they already find them cached
    assert check.control.on_vs_off_max_log_diff == pytest.approx(shift, abs=1e-9, rel=0.5)
    if shift == 0.0:
        assert check.status == "passed" and check.fails == 0 and check.max_log_diff == 0.0
    else:
        assert check.status == "failed" and check.fails == 2
        assert check.max_log_diff == pytest.approx(shift, rel=0.5)
        assert "the control held: the cache's doing" in check.error
        assert check.trials[0].when and "warm" in check.trials[0].when[0]
    others = [c for c in record.parity.checks if c.check != "prefix_cache"]
    assert {c.check for c in others} == {"order", "duplicates", "degenerate"}
    assert all(c.passing for c in others), [c for c in others if not c.passing]


HTTP_CASE = """
    name: keys
    model: {path: "embedded:tiny", dtype: float32}
    workload: {query_tokens: 16, num_items: 3, item_tokens: 2, label_token_ids: [10, 20]}
    cases:
      - engine: http
        launch: {command: ["{python}", "-m", "x", "{port}"]}
        clients: 1
EXTRA
    parity: {checks: CHECKS}
"""


@pytest.mark.parametrize("extra, checks, key, words", [
    ("", "[prefix_cache]", "parity.checks", "how to turn their cache off"),
    ("        base_url: http://127.0.0.1:1\n        prefix_cache: {cache_off: {a: true}}",
     "[prefix_cache]", "prefix_cache", "give launch too"),
    ("        prefix_cache: {trials: 2}", "[prefix_cache]", "cache_off", "required key"),
    ("        tolerance: -1", "[order]", "tolerance", "greater than or equal to 0"),
])
def test_the_new_keys_are_validated(tmp_path, extra, checks, key, words):
    from mibench.harness.config.spec import ConfigError

    text = HTTP_CASE.replace("EXTRA", extra).replace("CHECKS", checks)
    if "base_url" in extra:
        text = text.replace('        launch: {command: ["{python}", "-m", "x", "{port}"]}\n', "")
    with pytest.raises(ConfigError) as e:
        load_config(write_config(tmp_path, text))
    assert key in str(e.value) and words in str(e.value), str(e.value)


def test_tolerance_and_prefix_cache_leave_case_ids_alone(tmp_path):
    plain = HTTP_CASE.replace("EXTRA\n", "").replace("CHECKS", "[order]")
    keyed = HTTP_CASE.replace("EXTRA", "        tolerance: 0.001\n        prefix_cache: "
                              "{cache_off: {disable_radix_cache: true}}").replace(
        "CHECKS", "[order, prefix_cache]")
    (a,) = expand(load_config(write_config(tmp_path, plain, "a.yaml")))
    (b,) = expand(load_config(write_config(tmp_path, keyed, "b.yaml")))
    assert a.case_id == b.case_id
    assert b.http.tolerance == 1e-3 and b.http.prefix_trials == 3
    assert b.http.cache_off == (("disable_radix_cache", True),)
    from mibench.harness.under_test.parity_checks import server_tolerance

    assert server_tolerance(b) == 1e-3 and server_tolerance(a) == 1e-5


class SameScores:
    """A doctored engine: every item of a request gets the first item's scores (a mode
    that scores nothing; flashinfer#3434's symptom)."""

    def __init__(self, engine):
        self.engine = engine

    def __getattr__(self, name):
        return getattr(self.engine, name)

    def close(self) -> None:
        """The run closes its engines; the session's shared engine stays loaded."""

    def score(self, query, items, labels, **kw):
        import dataclasses

        out = self.engine.score(query, items, labels, **kw)
        return dataclasses.replace(out, scores=[list(out.scores[0]) for _ in out.scores])


@pytest.mark.slow
def test_a_degenerate_engine_fails_the_run_with_degenerate(tmp_path, jax_tiny):
    """`mibench run` with the doctored engine in process: every case is measured (its
    scores are valid probabilities), and `degenerate` fails it: exit 3 (a failed parity
    check), the record naming the request. The nightly fails such a night like any parity
    check (tests/test_nightly_rules.py)."""
    from mibench.harness.run.plan import plan_of
    from mibench.harness.run.runner import exit_code, run

    text = CONFIG.replace("""      - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
      - {engine: torch, mode: single}
""", "").replace("[order, duplicates, degenerate]", "[degenerate]")
    config = load_config(write_config(tmp_path, text))
    record = run(plan_of(config, out=tmp_path / "out", progress=False, workers=False,
                         engine_factory=lambda name, model, dtype, tp: SameScores(jax_tiny)))
    assert all(c.status == "ok" for c in record.cases)
    scores = {c.case_id: c for c in record.parity.checks if c.variant == "scores"}
    assert set(scores) == {SINGLE, PACKED}
    assert all(c.status == "failed" and c.spread == 0.0 and "all score the same" in c.error
               for c in scores.values())
    assert not record.parity.passed and exit_code(record) == 3
    assert jax_tiny.params is not None  # the session's shared engine was not closed


@pytest.mark.slow
def test_the_nightly_suites_doctored_commit_scores_nothing_and_degenerate_fails_it(jax_tiny):
    """The `degenerate` scenario of harness/jobs/nightly_suite.py appends
    `scratch.same_scores` to engines/modes/packed.py: packed's items, which score apart on
    the real model, then all take the first item's scores, and `degenerate` fails them."""
    import types
    from unittest import mock

    from mibench.engines.modes import packed
    from mibench.harness.ab.scratch import same_scores

    doctored = types.ModuleType("doctored")
    doctored.__dict__.update(vars(packed))
    exec(same_scores("score_packed"), doctored.__dict__)  # the commit's source, as appended
    request = REQ[0]
    items = [list(i) for i in request.items]

    def scores():
        return jax_tiny.score(list(request.query), items, [1, 2], mode="packed",
                              delimiter=151643, mask="segment").scores

    honest = np.asarray(scores())
    with mock.patch.object(packed, "score_packed", doctored.score_packed):
        bad = np.asarray(scores())
    assert len({tuple(row) for row in honest}) == len(items)  # the items score apart
    assert (bad == honest[:1]).all()  # each item: the first item's scores
    judged = {name: invariants.case_scores(_rec(scores=[rows.tolist()]), REQ, _spec(),
                                           "float32") for name, rows in
              (("honest", honest), ("doctored", bad))}
    assert judged["honest"].status == "passed"
    assert judged["doctored"].status == "failed" and judged["doctored"].spread == 0.0

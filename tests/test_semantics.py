"""`semantics: plain | delimited` in every mode (docs/semantics.md).

delimited: item i is read after `query d item_i` (positions: query 0..Q-1, d Q, item Q+1..);
plain: after `query item_i` (item Q..). In a packed sequence under plain the delimiters
still separate the items, but no item attends to any of them. Every mode must equal
`single` of the same semantics on log scores (the full-vocabulary scores are ~1e-5, so
only log scores tell them apart), the two semantics must give clearly different scores,
and a bad semantics is an error naming the field.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import (
    DELIM,
    LABELS,
    SEMANTICS_TIERED,
    SOFTMAX_TIERED,
    mode_examples,
    random_request,
    tiered,
)
from typer.testing import CliRunner

from mibench.engines import MODES, InputError, MibenchError
from mibench.engines.modes.layout import pack
from mibench.engines.request import make_request as build_request

SEMANTICS = ("delimited", "plain")
# 7 ragged items of 1..11 tokens (band 12): chunks of 3 leave one item, of 2 leave one
QUERY, ITEMS = random_request(41, query_len=37, num_items=7, item_len=(1, 12))
Q, N = len(QUERY), len(ITEMS)
JAX_CASES = mode_examples(skip=("single",))  # every example the registry declares
LOG_TOL = 1e-5  # a mode against single of the same engine, float32
ENGINE_TOL = 1e-4  # jax against the torch reference


def log_scores(engine, mode="single", semantics=None, apply_softmax=False, delimiter=DELIM,
               query=QUERY, items=ITEMS, **opts) -> np.ndarray:
    out = engine.score(query, items, LABELS, mode=mode, apply_softmax=apply_softmax,
                       delimiter=delimiter, semantics=semantics, **opts)
    return np.log(np.asarray(out.scores))


@pytest.fixture(scope="module")
def ref(jax_tiny, torch_tiny):
    """`single` log scores by (engine, semantics, apply_softmax), computed once."""
    cache = {}

    def get(engine: str, semantics: str, apply_softmax: bool) -> np.ndarray:
        key = (engine, semantics, apply_softmax)
        if key not in cache:
            cache[key] = log_scores(jax_tiny if engine == "jax" else torch_tiny,
                                    semantics=semantics, apply_softmax=apply_softmax)
        return cache[key]

    return get


@pytest.mark.parametrize("apply_softmax", SOFTMAX_TIERED)
@pytest.mark.parametrize("semantics", SEMANTICS_TIERED)
@pytest.mark.parametrize("mode,opts", tiered(JAX_CASES))
def test_every_jax_mode_matches_single_of_its_semantics(jax_tiny, ref, mode, opts, semantics,
                                                        apply_softmax):
    got = log_scores(jax_tiny, mode, semantics, apply_softmax, **opts)
    assert got.shape == (N, len(LABELS))
    assert np.abs(got - ref("jax", semantics, apply_softmax)).max() <= LOG_TOL
    assert np.abs(got - ref("torch", semantics, apply_softmax)).max() <= ENGINE_TOL
    # discriminative: the items get clearly different scores, or the match proves nothing
    assert np.ptp(got[:, 0]) > 0.1


@pytest.mark.parametrize("apply_softmax", [False, True])
@pytest.mark.parametrize("semantics", SEMANTICS)
def test_torch_modes_score_both_semantics(torch_tiny, ref, semantics, apply_softmax):
    single = ref("torch", semantics, apply_softmax)
    assert np.abs(single - ref("jax", semantics, apply_softmax)).max() <= ENGINE_TOL
    extend = log_scores(torch_tiny, "prefill_extend", semantics, apply_softmax,
                        extend_batch_size=3)
    assert np.abs(extend - single).max() <= LOG_TOL


@pytest.mark.parametrize("engine_fixture", ["jax_tiny", "torch_tiny"])
def test_plain_and_delimited_scores_differ(request, ref, engine_fixture):
    """The two semantics are different numbers, far apart compared with the tolerances
    above: a mode that ignored `semantics` would fail the parity tests."""
    name = engine_fixture.removesuffix("_tiny")
    for apply_softmax in (False, True):
        plain, delimited = ref(name, "plain", apply_softmax), ref(name, "delimited",
                                                                  apply_softmax)
        gap = np.abs(plain - delimited)
        assert gap.max() > 1e3 * LOG_TOL and np.median(gap) > 1e2 * LOG_TOL, gap


@pytest.mark.parametrize("mode,opts", [("packed", {"mask": "segment"}),
                                       ("chunked", {"chunk_size": 3, "mask": "dense"})])
def test_packed_plain_differs_from_delimited_and_ignores_the_separator(jax_tiny, ref, mode,
                                                                        opts):
    """Under plain the delimiter only separates: packed plain equals single without any
    delimiter at all, and is far from packed delimited."""
    plain = log_scores(jax_tiny, mode, "plain", **opts)
    no_delimiter = log_scores(jax_tiny, semantics="plain", delimiter=None)
    assert np.abs(plain - no_delimiter).max() <= LOG_TOL
    assert np.abs(plain - log_scores(jax_tiny, mode, "delimited", **opts)).max() > 1e-2


def test_controls_a_seen_delimiter_or_shifted_positions_are_caught(jax_tiny, ref,
                                                                   monkeypatch):
    """Control for the parity test: a plain layout whose items see the delimiter after the
    query, or whose items start at Q + 1, gives scores far from `single` plain."""
    from mibench.engines.modes import packed as packed_mode
    from mibench.engines.modes.layout import PackedBatch

    want, real_pack, real_mask = ref("jax", "plain", False), packed_mode.pack, \
        PackedBatch.dense_mask

    def sees_delimiter(self):
        mask = real_mask(self)
        mask[:, self.prefix_pad:, self.prefix_pad] = True  # the leading delimiter
        return mask

    def shifted(*args, **kwargs):
        batch = real_pack(*args, **kwargs)
        batch.positions_bt[:, batch.prefix_pad:] += 1
        return batch

    for target, name, wrong in ((PackedBatch, "dense_mask", sees_delimiter),
                                (packed_mode, "pack", shifted)):
        with monkeypatch.context() as m:
            m.setattr(target, name, wrong)
            bad = log_scores(jax_tiny, "packed", "plain", mask="dense")
        assert np.abs(bad - want).max() > 1e2 * LOG_TOL, name


def test_default_semantics_follows_the_delimiter(jax_tiny, ref):
    assert np.array_equal(log_scores(jax_tiny, semantics=None), ref("jax", "delimited", False))
    assert np.array_equal(log_scores(jax_tiny, semantics=None, delimiter=None),
                          ref("jax", "plain", False))


def request(semantics, delimiter=DELIM, items=ITEMS):
    return build_request(QUERY, items, LABELS, delimiter=delimiter, semantics=semantics,
                         vocab_size=151936, max_length=4096)


def test_plain_layout_items_see_the_query_only_and_continue_its_positions():
    """The packed plain layout: `query d item1 d ...`, item positions from Q, and in the
    dense mask (built from the same O(T) metadata as the segment kernels) item rows see
    the query and their own earlier tokens, never a delimiter, another item or padding."""
    req = request("plain")
    batch = pack(req, [list(range(N))])
    tokens, positions = batch.tokens_bt[0], batch.positions_bt[0]
    pp = batch.prefix_pad
    assert tokens[:Q].tolist() == QUERY and positions[:Q].tolist() == list(range(Q))
    assert tokens[pp] == DELIM and batch.prefix_end_b.tolist() == [Q]
    mask = batch.dense_mask()[0]
    at = pp + 1
    for k, item in enumerate(ITEMS):
        own = np.arange(at, at + len(item))
        assert tokens[own].tolist() == item and tokens[at + len(item)] == DELIM
        assert positions[own].tolist() == list(range(Q, Q + len(item)))
        for r, row in enumerate(own):
            assert set(np.flatnonzero(mask[row])) == set(range(Q)) | set(own[:r + 1])
        assert batch.last_row_r[k] == own[-1]
        at += len(item) + 1
    assert (tokens == DELIM).sum() == N + 1  # query d item1 d ... itemN d
    # the delimited layout, for contrast: items see `query d` and start at Q + 1
    delimited = pack(request("delimited"), [list(range(N))])
    assert delimited.prefix_end_b.tolist() == [Q + 1]
    assert delimited.positions_bt[0, delimited.prefix_pad] == Q + 1


def test_dense_and_segment_masks_agree_under_plain(jax_tiny):
    """Same layout, two mask implementations: the same scores (and a chunked layout with a
    last chunk of one item)."""
    for opts in ({"chunk_size": 3}, {"chunk_size": 7}):
        dense = log_scores(jax_tiny, "chunked", "plain", mask="dense", **opts)
        segment = log_scores(jax_tiny, "chunked", "plain", mask="segment", **opts)
        assert np.abs(dense - segment).max() <= LOG_TOL


def test_num_tokens_under_plain(jax_tiny, torch_tiny):
    """Plain runs the query without the delimiter in single and prefill_extend; a packed
    sequence holds `query d item1 d ...` under both semantics."""
    lens = [len(i) for i in ITEMS]
    items = sum(lens)
    expected = {("single", "plain"): N * Q + items, ("single", "delimited"): N * (Q + 1) + items,
                ("prefill_extend", "plain"): Q + items,
                ("prefill_extend", "delimited"): Q + 1 + items,
                ("packed", "plain"): Q + 1 + items + N, ("packed", "delimited"): Q + 1 + items + N,
                ("chunked", "plain"): 3 * (Q + 1) + items + N,
                ("chunked", "delimited"): 3 * (Q + 1) + items + N}
    for (mode, semantics), want in expected.items():
        opts = {"chunk_size": 3} if mode == "chunked" else {}
        got = jax_tiny.score(QUERY, ITEMS, LABELS, mode=mode, delimiter=DELIM,
                             semantics=semantics, **opts).num_tokens
        assert got == want, (mode, semantics)
        prefix = Q + (semantics == "delimited")
        assert MODES["jax"][mode].num_tokens(prefix, lens, opts, semantics) == want
        if mode in MODES["torch"]:
            assert torch_tiny.score(QUERY, ITEMS, LABELS, mode=mode, delimiter=DELIM,
                                    semantics=semantics).num_tokens == want


def test_every_mode_declares_both_semantics():
    import mibench.engines

    assert mibench.engines.MODES is MODES
    for engine, modes in MODES.items():
        for mode in modes.values():
            assert set(mode.semantics) == set(SEMANTICS), (engine, mode.name)
            for semantics in SEMANTICS:
                assert mode.check_semantics(semantics, DELIM) == semantics
            assert mode.check_semantics(None, DELIM) == "delimited"
            assert mode.needs_delimiter == (mode.name in ("packed", "chunked"))
            if not mode.needs_delimiter:
                assert mode.check_semantics(None, None) == "plain"
                assert mode.check_semantics("plain", None) == "plain"


BAD = [  # (mode, semantics, delimiter, field, words)
    ("single", "delimited", None, "semantics", "needs a delimiter token"),
    ("prefill_extend", "delimited", None, "semantics", "needs a delimiter token"),
    ("single", "plainish", DELIM, "semantics", "must be one of delimited, plain"),
    ("single", 1, DELIM, "semantics", "must be one of"),
    ("packed", "plain", None, "delimiter", "to separate them, under plain semantics too"),
    ("chunked", "plain", None, "delimiter", "to separate them"),
    ("packed", None, None, "delimiter", "needs a delimiter token"),
    ("packed", "delimited", None, "semantics", "needs a delimiter token"),
]


BAD_CALLS = [(engine, *case) for engine in ("jax", "torch") for case in BAD
             if case[0] in MODES[engine]]


@pytest.mark.parametrize("engine_name,mode,semantics,delimiter,field,words", BAD_CALLS,
                         ids=[f"{e}-{m}-{s}-{d}" for e, m, s, d, _, _ in BAD_CALLS])
def test_bad_semantics_names_the_field(request, engine_name, mode, semantics, delimiter,
                                       field, words):
    engine = request.getfixturevalue(f"{engine_name}_tiny")
    with pytest.raises(MibenchError) as err:
        engine.score([5, 6, 7], [[8, 9], [10]], LABELS, mode=mode, semantics=semantics,
                     delimiter=delimiter)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ") and words in str(err.value)
    if field == "semantics" and mode == "single":
        assert isinstance(err.value, InputError)


CONFIG = """\
name: s
model: {{path: "embedded:tiny"}}
workload: {{query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [198]{extra}}}
runs: {{warmup: 0, timed: 1}}
cases:
  - {{engine: jax, mode: {mode}}}
"""


def config(tmp_path, extra="", mode="single"):
    from mibench.harness.config import load_config
    from mibench.harness.config.matrix import expand
    from mibench.harness.testing import write_config

    return expand(load_config(write_config(tmp_path, CONFIG.format(extra=extra, mode=mode))))


def test_config_semantics_reaches_the_case_and_the_engine(tmp_path):
    from mibench.harness.run.pool import Scoring, make_call

    (case,) = config(tmp_path, ", delimiter: 151643, semantics: plain", "packed")
    assert case.workload.semantics == "plain"
    assert case.workload.as_dict()["semantics"] == "plain"
    (unset,) = config(tmp_path, ", delimiter: 151643")
    assert unset.workload.semantics is None and "semantics" not in unset.workload.as_dict()

    class Recorder:
        def __init__(self):
            self.kwargs = []

        def score(self, query, items, labels, **kwargs):
            self.kwargs.append(kwargs)
            return type("R", (), {"scores": [[0.5]] * len(items)})()

    from mibench.workloads import Request

    engine, reqs = Recorder(), [Request(query=(1, 2), items=((3,), (4,)))]
    make_call(engine, reqs, Scoring(case.workload, "packed", {}))()
    make_call(engine, reqs, case)()
    make_call(engine, reqs, Scoring(unset.workload, "single", {}))()
    assert [k.get("semantics") for k in engine.kwargs] == ["plain", "plain", None]
    assert "semantics" not in engine.kwargs[-1]  # unset: the engine's default


@pytest.mark.parametrize("extra,mode,key,words", [
    (", semantics: delimited", "single", "workload.semantics", "needs a delimiter token"),
    (", semantics: plain", "packed", "workload.delimiter", "to separate them"),
    (", semantics: loose", "single", "workload.semantics", "delimited"),
])
def test_config_semantics_errors_name_the_key(tmp_path, extra, mode, key, words):
    from mibench.harness.config.spec import ConfigError

    with pytest.raises(ConfigError) as err:
        config(tmp_path, extra, mode)
    assert key in str(err.value) and words in str(err.value)


def test_cli_score_semantics(monkeypatch):
    from mibench.harness.cli import app

    runner = CliRunner()
    base = ["score", "--query-ids", "1,2,3,4", "--item-ids", "5,6", "--item-ids", "7",
            "--labels", "198,9834", "--delimiter", "151643"]
    runs = {s: runner.invoke(app, [*base, "--semantics", s]) for s in SEMANTICS}
    for result in runs.values():
        assert result.exit_code == 0, result.output
    plain, delimited = (np.log(json.loads(runs[s].output)["scores"]) for s in ("plain",
                                                                               "delimited"))
    assert np.abs(plain - delimited).max() > 1e-2
    assert json.loads(runs["plain"].output)["num_tokens"] == 2 * 4 + 3
    for args, needle in ((["--semantics", "both"], "--semantics: must be one of"),
                         (["--semantics", "plain", "--mode", "packed"],
                          "--delimiter: mode 'packed' packs items")):
        bad = runner.invoke(app, [*base[:-2], *args])
        assert bad.exit_code == 2 and needle in bad.output, bad.output
    no_delimiter = runner.invoke(app, [*base[:-2], "--semantics", "delimited"])
    assert no_delimiter.exit_code == 2 and "--semantics: delimited semantics" in \
        no_delimiter.output

"""Scores are checked where they enter (mibench/checks.py `check_scores`): an engine's
`score` (jax, torch; the http engine's wire: tests/test_http_misbehaving.py), the harness's
record of a case whatever the engine, and `mibench serve`'s answer. Anything a correct
engine cannot return (NaN, infinity, outside [0, 1], rows that do not sum as they must) is
an InvalidScores naming the item, and a case that got it is `failed` naming the request,
never an `ok` case with a NaN in its artifact."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from mibench.checks import check_scores, row_tolerance
from mibench.engines import InvalidScores, ScoreResult, load_engine
from mibench.harness.records import read_artifact
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import fake_factory, fixed_peak, write_config

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize("rows,softmax,dtype,needle", [
    ([[0.5, 0.5], [NAN, 0.5]], True, "float32", "item 1: score 0 is nan, not a finite"),
    ([[0.1, INF]], False, "float32", "item 0: score 1 is inf, not a finite probability"),
    ([[0.1, 0.2], [0.3, -1e-9]], False, "float32", "item 1: score 1 is -1e-09, not a prob"),
    ([[1.5, 0.0]], False, "float32", "item 0: score 0 is 1.5, not a probability in [0, 1]"),
    ([[0.5, 0.4999]], True, "float32", "item 0: softmax scores sum to 0.9999, not 1"),
    ([[0.5, 0.6]], True, "bfloat16", "item 0: softmax scores sum to 1.1, not 1"),
    ([[0.7, 0.6]], False, "float32", "item 0: label probabilities sum to 1.2999"),
])
def test_scores_no_engine_can_return_are_refused_naming_the_item(rows, softmax, dtype, needle):
    with pytest.raises(InvalidScores, match=needle.replace("[", r"\[").replace("]", r"\]")):
        check_scores(rows, softmax, dtype)


def test_rows_within_the_dtypes_tolerance_pass():
    check_scores([[0.5, 0.5 + 5e-6]], True, "float32")
    check_scores([[0.5, 0.51]], True, "bfloat16")  # bfloat16 softmax: 2e-2
    check_scores([[1e-30, 0.0], [1.0, 0.0]], False, "float32")  # an underflow, a certainty
    assert row_tolerance("float32", 1000) > 1e-5  # n rounding errors of 2^-23 at least
    with pytest.raises(InvalidScores):
        check_scores([[0.5, 0.51]], True, "float32")


def test_a_label_asked_for_twice_counts_once_in_the_sum():
    """p(label 7) = 0.6 asked for twice is not a row summing to 1.2."""
    check_scores([[0.6, 0.6]], False, "float32", labels=[7, 7])
    with pytest.raises(InvalidScores, match="sum to 1.2"):
        check_scores([[0.6, 0.6]], False, "float32", labels=[7, 8])


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    """The tiny preset with a final norm of NaN: a real checkpoint whose scores are NaN."""
    from safetensors.numpy import load_file, save_file

    from mibench.engines import model_folder

    folder = tmp_path_factory.mktemp("models") / "nan-tiny"
    shutil.copytree(model_folder("embedded:tiny"), folder)
    (folder / "mibench-manifest.json").unlink(missing_ok=True)  # its files, as they are
    weights = folder / "model.safetensors"
    tensors = load_file(weights)
    tensors["model.norm.weight"] = np.full_like(tensors["model.norm.weight"], np.nan)
    save_file(tensors, weights, metadata={"format": "pt"})
    return str(folder)


@pytest.mark.parametrize("engine", ["jax", "torch"])
def test_an_engine_whose_model_gives_nan_raises_naming_the_item(nan_model, engine):
    """Before: ScoreResult(scores=[[nan, nan], ...]) came back as if it were scores."""
    eng = load_engine(engine, model=nan_model)
    for softmax in (True, False):
        with pytest.raises(InvalidScores, match=rf"^item 0: score 0 is nan, not a finite "
                                                rf"probability \(the {engine} engine, mode "
                                                r"single, float32\)$"):
            eng.score([1, 2, 3], [[4], [5, 6]], [198, 9834], apply_softmax=softmax)


# --- the harness: a case that got such scores is failed, its artifact standard JSON -------

CONFIG = """
name: t
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [1, 2],
           delimiter: 151643, apply_softmax: SOFTMAX, seed: 0}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed}
"""


def run_fake(tmp_path, softmax: bool = True, **fake) -> tuple:
    from mibench.harness.config import load_config

    path = write_config(tmp_path, CONFIG.replace("SOFTMAX", str(softmax).lower()))
    record = run(plan_of(load_config(path), out=tmp_path / "out", progress=False,
                         engine_factory=fake_factory(**fake), peak=fixed_peak()))
    artifact = next((tmp_path / "out").glob("*.json"))

    def refuse(name):
        raise AssertionError(f"bare {name} in the artifact")

    json.loads(artifact.read_text(), parse_constant=refuse)
    return record, read_artifact(artifact)


@pytest.mark.parametrize("softmax", [True, False])
def test_the_fake_engine_gives_scores_a_real_engine_could(tmp_path, softmax):
    record, _ = run_fake(tmp_path, softmax)
    assert [c.status for c in record.cases] == ["ok", "ok"]


def test_a_case_whose_engine_returns_nan_unchecked_is_failed_naming_request_and_item(tmp_path):
    """An engine that does not check (a fake here; another revision's under `mibench ab`):
    the harness checks what enters the record."""
    def second_item_nan(rows):
        return [rows[0], [NAN, *rows[1][1:]], *rows[2:]]

    record, saved = run_fake(tmp_path, scores=second_item_nan)
    for case in saved.cases:
        assert case.status == "failed" and case.error.type == "InvalidScores"
        assert case.error.message == "request 0: item 1: score 0 is nan, not a finite " \
                                     "probability"
        assert case.scores is None and case.metrics.score_digest is None
        assert len(case.timed_s) == 3  # what was measured is kept


def test_an_engines_invalid_scores_in_a_timed_call_name_the_request(tmp_path):
    """The engine's own check raised (here on call 3: after the untimed warm-up call and
    the first call, request 0 of the first timed run)."""
    def trouble(engine, n):
        if n == 3:
            raise InvalidScores("item 2: score 1 is -0.5, not a probability in [0, 1]")

    record, _ = run_fake(tmp_path, on_call=trouble)
    case = record.cases[0]
    assert case.status == "failed" and case.error.type == "InvalidScores", case.error
    assert case.error.message.startswith("request 0: item 2: score 1 is -0.5")
    assert record.cases[1].status == "ok"


@pytest.mark.slow
def test_serve_answers_500_when_the_engine_returns_invalid_scores():
    from mibench.engines import HttpClient
    from mibench.harness.serve import Served, Settings, build_app

    class Broken:
        model_config = None

        def score(self, query, items, label_token_ids, **kwargs):
            if query == [13]:
                raise InvalidScores("item 0: score 0 is nan, not a finite probability")
            return ScoreResult(scores=[[0.25] for _ in items], mode="single",
                               num_items=len(items), num_tokens=2)

    with Served(build_app(Broken(), Settings(model="x"))) as server:
        client = HttpClient(server.url, 10)
        body = {"query": [13], "items": [[1]], "label_token_ids": [2]}
        reply = client.request("POST", "/v1/score", json.dumps(body).encode())
        assert reply.status == 500, reply.body
        assert "scores that cannot be right: item 0: score 0 is nan" in \
            json.loads(reply.body)["message"]
        body["query"] = [1]
        assert client.request("POST", "/v1/score", json.dumps(body).encode()).status == 200

"""Every bad input is a clear MibenchError naming its field, raised before any compute."""

from __future__ import annotations

import json

import pytest
from conftest import DELIM, LABELS

from mibench.engines import InputError, ModelError, load_engine
from mibench.engines.embedded import make_model

Q, ITEMS = [5, 6, 7], [[8, 9], [10]]


@pytest.mark.parametrize("engine_fixture", ["jax_tiny", "torch_tiny"])
@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"query": []}, "query", "empty"),
        ({"items": []}, "items", "non-empty"),
        ({"items": [[8], []]}, "items[1]", "empty"),
        ({"query": [5, -1]}, "query", "outside the vocabulary"),
        ({"items": [[8], [151936]]}, "items[1]", "outside the vocabulary"),
        ({"query": [5, 1.5]}, "query", "not an integer"),
        ({"query": [5, DELIM], "delimiter": DELIM}, "query", "delimiter"),
        ({"items": [[8], [DELIM, 3]], "delimiter": DELIM}, "items[1]", "delimiter"),
        ({"label_token_ids": []}, "label_token_ids", "non-empty"),
        ({"label_token_ids": [198, 200000]}, "label_token_ids", "outside the vocabulary"),
        ({"delimiter": 151936}, "delimiter", "outside the vocabulary"),
        ({"query": [1] * 40960, "delimiter": DELIM}, "items[0]", "longer than the model"),
    ],
)
def test_bad_request(request, engine_fixture, kwargs, field, words):
    engine = request.getfixturevalue(engine_fixture)
    args = {"query": Q, "items": ITEMS, "label_token_ids": LABELS} | kwargs
    with pytest.raises(InputError) as err:
        engine.score(**args)
    assert err.value.field == field
    assert str(err.value).startswith(f"{field}: ") and words in str(err.value)


def test_unknown_preset():
    with pytest.raises(ModelError, match="unknown preset 'nope'"):
        load_engine("jax", model="embedded:nope")


def test_folder_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "README.md").write_text("hello")
    with pytest.raises(ModelError, match="not a checkpoint folder"):
        load_engine("jax", model=str(tmp_path))
    with pytest.raises(ModelError, match="no such checkpoint folder"):
        load_engine("torch", model=str(tmp_path / "missing"))


def test_unsupported_architecture(tmp_path):
    folder = make_model("tiny", tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg | {"model_type": "mamba"}))
    with pytest.raises(ModelError, match="unsupported architecture 'mamba'"):
        load_engine("jax", model=str(folder))


def test_checkpoint_that_does_not_match_its_config(tmp_path):
    folder = make_model("tiny", tmp_path / "m")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(cfg | {"num_hidden_layers": 5,
                                                            "intermediate_size": 512}))
    with pytest.raises(ModelError) as err:
        load_engine("jax", model=str(folder))
    msg = str(err.value)
    assert "missing tensor model.layers.4." in msg and "shape (256, 768)" in msg


@pytest.mark.parametrize(("kwargs", "field"), [({"name": "onnx"}, "engine"),
                                               ({"name": "jax", "dtype": "fp8"}, "dtype"),
                                               ({"name": "jax", "tp": 0}, "tp")])
def test_bad_engine_arguments(kwargs, field):
    from mibench.engines import MibenchError

    with pytest.raises(MibenchError) as err:
        load_engine(**kwargs)
    assert err.value.field == field


def test_unknown_mode(jax_tiny):
    from mibench.engines import MibenchError

    with pytest.raises(MibenchError, match="unknown mode 'fastest'"):
        jax_tiny.score(Q, ITEMS, LABELS, mode="fastest")

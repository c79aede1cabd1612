"""Embedded checkpoints: deterministic, loadable by transformers, sharded when large."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from conftest import DELIM, LABELS, random_request

from mibench.engines import embedded, model_cache
from mibench.engines.checkpoint import load_params


def _digest(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir())}


def test_make_model_is_byte_identical(tmp_path):
    a = embedded.make_model("tiny", tmp_path / "d1")
    b = embedded.make_model("tiny", tmp_path / "d2")
    assert _digest(a) == _digest(b)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(_digest(a))


@pytest.mark.slow
def test_transformers_loads_folder_and_agrees_with_torch_engine(torch_tiny):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = model_cache.ensure_embedded("tiny")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    assert tok.decode(tok.encode("multi-item scoring")) == "multi-item scoring"
    query, items = random_request(5, num_items=3)
    expected = []
    with torch.inference_mode():
        for item in items:
            ids = torch.tensor([query + [DELIM] + item])
            logp = torch.log_softmax(model(ids).logits[0, -1].double(), -1)
            expected.append(logp[LABELS].exp().numpy())
    got = torch_tiny.score(query, items, LABELS, delimiter=DELIM).scores
    np.testing.assert_allclose(got, np.array(expected), rtol=1e-4)


@pytest.mark.slow
def test_sharded_checkpoint_loads_like_single_file(tmp_path, monkeypatch):
    single = embedded.make_model("tiny", tmp_path / "single")
    monkeypatch.setattr(embedded, "SHARD_BYTES", 64 * 1024**2)
    sharded = embedded.make_model("tiny", tmp_path / "sharded")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    _, a = load_params(single)
    _, b = load_params(sharded)
    np.testing.assert_array_equal(a["embed"], b["embed"])
    for key in a["layers"]:
        np.testing.assert_array_equal(a["layers"][key], b["layers"][key])


def test_real_shapes_match_published_parameter_counts():
    from mibench.engines.config import from_hf_config
    from mibench.engines.presets import PRESETS, hf_config

    counts = {name: from_hf_config(hf_config(p)).num_params() / 1e9
              for name, p in PRESETS.items()}
    assert counts["qwen3-0.6b"] == pytest.approx(0.596, abs=0.01)
    assert counts["qwen3-1.7b"] == pytest.approx(1.72, abs=0.03)
    assert counts["qwen3-4b"] == pytest.approx(4.02, abs=0.05)
    assert counts["qwen2.5-1.5b"] == pytest.approx(1.54, abs=0.03)
    assert counts["llama-3.2-1b"] == pytest.approx(1.24, abs=0.03)

"""Placement, not only scores: at tp 2 (two simulated CPU devices, in a subprocess) the
weights sit as engines/sharding.py declares (column- and row-split projections, replicated
embedding and norms) and what the compiled programs return is placed in the named
layouts: the prefix KV cache split by KV head (KV_L1PKH), the scores replicated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # a subprocess with its own JAX devices

SCRIPT = textwrap.dedent("""
    import json, numpy as np
    from jax.sharding import PartitionSpec as P
    from mibench.engines import load_engine
    from mibench.engines.modes.extend import prefill
    from mibench.engines.modes.layout import prefix_tokens
    from mibench.engines.request import make_request
    from mibench.engines.sharding import KV_L1PKH, LAYER_SPLIT
    e = load_engine("jax", model="embedded:tiny", tp=2)
    def spec(x):  # padded to the array's rank (JAX drops trailing Nones)
        names = [None if a is None else str(a) for a in x.sharding.spec]
        return names + [None] * (x.ndim - len(names))
    layers = {k: spec(v) for k, v in e.params["layers"].items()}
    req = make_request(list(range(5, 40)), [[7, 8]], [198], delimiter=151643,
                       vocab_size=e.cfg.vocab_size, max_length=4096)
    tokens, n = prefix_tokens(req)
    k, v = prefill(e.params, tokens, n, cfg=e.cfg, attn=e.attention({}))
    out = e.score(list(range(5, 40)), [[7, 8]], [198], mode="prefill_extend",
                  delimiter=151643)
    print(json.dumps({"layers": layers, "split": LAYER_SPLIT, "embed": spec(e.params["embed"]),
                      "kv": spec(k), "kv_named": [None if a is None else str(a)
                                                  for a in KV_L1PKH],
                      "devices": len(k.sharding.device_set), "scores": out.scores}))
""")


def test_weights_and_kv_cache_are_placed_as_declared():
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
           "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    for name, axis in got["split"].items():
        if name in got["layers"]:
            want = ["tp" if i == axis else None for i in range(len(got["layers"][name]))]
            assert got["layers"][name] == want, name  # split where the layout says
    assert all(a is None for a in got["embed"])  # replicated
    assert got["devices"] == 2 and got["kv"] == got["kv_named"]  # KV heads over tp
    assert len(got["scores"]) == 1


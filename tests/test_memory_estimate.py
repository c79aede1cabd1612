"""The memory estimator (`Mode.host_bytes`, modes/accounting.py): its padding agrees with the
layout's, it counts the device working set only when given the model, dense packing is
dominated by the T x T scores of every head, and (slow) the estimate brackets the peak RSS
that scoring really takes, in a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from mibench.engines import MODES, Shape, model_facts
from mibench.engines.modes import accounting
from mibench.engines.modes.layout import bucket_length, item_bucket, pack
from mibench.engines.request import make_request

DELIM = 151643


def test_padding_rules_are_the_layouts():
    """The layout pads with the rules the estimates count with (one definition), and the
    rules are the documented ones: powers of two >= 16 up to 512, then multiples of 512;
    items in multiples of 4 up to 64."""
    assert bucket_length is accounting.bucket_length and item_bucket is accounting.item_bucket
    assert [bucket_length(n) for n in (0, 1, 16, 17, 300, 512, 513, 1100)] == \
        [16, 16, 16, 32, 512, 512, 1024, 1536]
    assert [item_bucket(n) for n in (1, 4, 5, 63, 64, 65, 600)] == [4, 4, 8, 64, 64, 128, 1024]


@pytest.mark.parametrize("q,n,lengths", [(7, 3, (2, 5)), (256, 500, (8, 8)), (2000, 64, (1, 40)),
                                         (30, 1000, (3, 3))])
def test_packed_length_is_the_layouts_or_at_most_a_bucket_more(q, n, lengths):
    rng = np.random.default_rng(n)
    items = [[5] * int(rng.integers(lengths[0], lengths[1] + 1)) for _ in range(n)]
    req = make_request([3] * q, items, [1], delimiter=DELIM, vocab_size=151936,
                       max_length=10**6)
    real = pack(req, [list(range(n))]).tokens_bt.shape[1]
    mean = sum(map(len, items)) / n
    shape = Shape(q + 1, n, mean, longest=max(map(len, items)))
    t, _, _ = accounting.packed_tokens(shape, n)
    assert 0 <= t - real <= 512, (t, real)


def test_the_device_working_set_needs_the_model():
    tiny = model_facts("embedded:tiny")
    packed = MODES["jax"]["packed"]
    bare = packed.host_bytes(Shape(257, 500, 8.0), {"mask": "dense"})
    assert set(bare) == {"token lists", "dense mask"}  # what `validate` counts
    full = packed.host_bytes(Shape(257, 500, 8.0, model=tiny), {"mask": "dense"})
    assert {"attention scores", "activations", "compile"} <= set(full)
    t = accounting.packed_tokens(Shape(257, 500, 8.0), 500)[0]
    assert t == 5120 and bare["dense mask"] == 3 * t * t  # the mask and its temporaries
    # the T x T scores of every head in float32 dominate: 4 copies (accounting.SCORE_COPIES)
    assert full["attention scores"] == t * t * (4 * tiny.num_heads * 4 + 1)
    assert max(full, key=full.get) == "attention scores"
    segment = packed.host_bytes(Shape(257, 500, 8.0, model=tiny), {"mask": "segment"})
    assert sum(segment.values()) < sum(full.values()) / 10 and "dense mask" not in segment


def test_dense_extend_counts_its_mask_and_scores():
    """prefill_extend with mask dense: the [B, L, P + L] mask on the host (what `validate`
    counts), and with the model every head's float32 scores against [prefix | own tokens];
    the segment merge holds neither."""
    tiny = model_facts("embedded:tiny")
    extend = MODES["jax"]["prefill_extend"]
    opts = {"extend_batch_size": 12, "mask": "dense"}
    bare = extend.host_bytes(Shape(2001, 500, 20.0), opts)
    b, length, keys = 12, 20, 2048 + 20
    assert bare["dense mask"] == b * length * keys
    full = extend.host_bytes(Shape(2001, 500, 20.0, model=tiny), opts)
    assert full["attention scores"] == b * length * keys * (2 * tiny.num_heads * 4 + 1)
    segment = extend.host_bytes(Shape(2001, 500, 20.0, model=tiny), {"extend_batch_size": 12})
    assert not {"dense mask", "attention scores"} & set(segment)
    assert sum(full.values()) > sum(segment.values())


def test_every_mode_counts_more_for_a_bigger_request():
    tiny = model_facts("embedded:tiny")
    for mode in MODES["jax"].values():
        for options in mode.examples:
            small = sum(mode.host_bytes(Shape(65, 8, 4.0, model=tiny), options).values())
            big = sum(mode.host_bytes(Shape(2001, 800, 40.0, model=tiny), options).values())
            assert big > small > accounting.COMPILE_BYTES, (mode.name, options)


def test_a_long_item_widens_the_band():
    """One long item among short ones: the band (and T) follow the longest item."""
    tiny = model_facts("embedded:tiny")
    packed = MODES["jax"]["packed"]
    even = packed.host_bytes(Shape(65, 1000, 5.0, model=tiny), {"mask": "segment"})
    skewed = packed.host_bytes(Shape(65, 1000, 5.0, longest=4000, model=tiny),
                               {"mask": "segment"})
    assert skewed["band scores"] > 50 * even["band scores"]


def test_bfloat16_counts_the_cpus_float32_copies():
    tiny = model_facts("embedded:tiny")
    single = MODES["jax"]["single"]
    f32 = single.host_bytes(Shape(2001, 8, 20.0, model=tiny), {})
    bf16 = single.host_bytes(Shape(2001, 8, 20.0, model=tiny, dtype="bfloat16"), {})
    assert bf16["activations"] == 2 * f32["activations"]
    assert bf16["weight copies"] == tiny.vocab_size * tiny.hidden_size * 4


PROBE = r"""
import json, os, re, sys
import numpy as np
def status(key):
    text = open("/proc/self/status").read()
    return int(re.search(key + r":\s+(\d+)", text).group(1)) * 1024
spec = json.loads(sys.argv[1])
from mibench.engines import load_engine
eng = load_engine("jax", model="embedded:tiny", dtype="float32")
rng = np.random.default_rng(0)
q = rng.integers(0, 150000, spec["Q"]).tolist()
items = [rng.integers(0, 150000, spec["L"]).tolist() for _ in range(spec["N"])]
eng.score([1, 2, 3], [[4, 5]], [198], mode="single", delimiter=151643)  # XLA up
open("/proc/self/clear_refs", "w").write("5")  # the peak (VmHWM) starts again from here
base = status("VmRSS")
eng.score(q, items, [198, 9834], mode=spec["mode"], delimiter=151643, **spec["opts"])
print(json.dumps({"rise": status("VmHWM") - base}))
"""


@pytest.mark.slow
@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK),
                    reason="needs Linux's /proc/self/clear_refs to reset the peak RSS")
@pytest.mark.parametrize("mode,opts,q,n,length", [
    ("packed", {"mask": "dense"}, 256, 300, 8),
    ("packed", {"mask": "segment"}, 64, 3000, 5),
    ("prefill_extend", {"extend_batch_size": 256}, 1000, 256, 20),
    ("prefill_extend", {"extend_batch_size": 256, "mask": "dense"}, 1000, 256, 20),
])
def test_estimate_brackets_the_peak_rss(mode, opts, q, n, length):
    """First call of a new shape (compile and run) in a fresh process: the estimate is at
    least 0.8 and at most 1.75 times the peak RSS rise (docs/cli.md has the table)."""
    spec = {"mode": mode, "opts": opts, "Q": q, "N": n, "L": length}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(spec)], capture_output=True,
                         text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr[-2000:]
    rise = json.loads(out.stdout.strip().splitlines()[-1])["rise"]
    shape = Shape(q + 1, n, float(length), longest=length,
                  model=model_facts("embedded:tiny"))
    estimate = sum(MODES["jax"][mode].host_bytes(shape, opts).values())
    assert 0.8 * rise <= estimate <= 1.75 * rise, (estimate / 2**20, rise / 2**20)

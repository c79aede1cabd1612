"""The shipped padding-bucket sweep: v6e1.yaml runs prefill+extend at extend batch 16 (where
the seeds saw tail pauses) against three `precompile_bs` bucket sets, a list of lists that
expands to one case per set with distinct ids; `mibench validate` lists them and rejects a
set that cannot hold the batch, naming the field."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.config.matrix import expand

V6E1 = Path(__file__).parent.parent / "configs" / "v6e1.yaml"
SETS = [[1, 2, 4, 8, 16], [16], [8, 12, 16]]


def test_v6e1_sweeps_padding_buckets_at_batch_16():
    specs = [c for c in expand(load_config(V6E1)) if c.mode == "prefill_extend"
             and c.params.get("extend_batch_size") == 16 and "precompile_bs" in c.params]
    assert [c.params["precompile_bs"] for c in specs] == SETS
    ids = [c.case_id for c in specs]
    assert len(set(ids)) == 3 and ids == [
        "jax/prefill_extend/extend_batch_size=16/precompile_bs=1,2,4,8,16/tp=1",
        "jax/prefill_extend/extend_batch_size=16/precompile_bs=16/tp=1",
        "jax/prefill_extend/extend_batch_size=16/precompile_bs=8,12,16/tp=1"]
    every = [c.case_id for c in expand(load_config(V6E1))]
    assert len(every) == len(set(every))


def test_validate_lists_the_sweep_and_rejects_a_set_too_small():
    out = CliRunner().invoke(app, ["validate", str(V6E1)])
    assert out.exit_code == 0, out.output
    for s in ("precompile_bs=1,2,4,8,16/tp=1", "precompile_bs=16/tp=1",
              "precompile_bs=8,12,16/tp=1"):
        assert f"extend_batch_size=16/{s}" in out.output
    index = next(c.index for c in expand(load_config(V6E1))
                 if c.params.get("extend_batch_size") == 16)
    out = CliRunner().invoke(app, ["validate", str(V6E1), "--set",
                                   f"cases.{index}.precompile_bs=[[1,2,4,8,12],[12]]"])
    assert out.exit_code == 2
    assert f"cases.{index}.precompile_bs" in out.output and "extend_batch_size=16" in out.output


def test_v6e1_sweeps_the_dense_extend_batch_to_64():
    """The seeds' tail pauses (seed 000: extend batch 16 and above, the dense mask): one
    case per batch size from 8 to 64, each timing its batches in a synced pass."""
    specs = [c for c in expand(load_config(V6E1)) if c.mode == "prefill_extend"
             and c.params.get("mask") == "dense" and "precompile_bs" not in c.params]
    assert [c.params["extend_batch_size"] for c in specs] == [8, 16, 24, 32, 48, 64]

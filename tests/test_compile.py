"""`mibench compile`: the engine's programs compiled by the real TPU compiler (libtpu) for
compile-only TPU devices, from shapes alone. The compiling tests need libtpu: it is
installed once into the cache (`harness.compile.libtpu`), or they skip saying why."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from mibench.engines import MibenchError, tpu_target
from mibench.harness.records.compile import (
    COMPILE_SCHEMA_FILE,
    read_compile_artifact,
)

TINY = """\
name: compile-tiny
model: {{path: "embedded:tiny", dtype: bfloat16}}
topology: {{tp: {tp}}}
workload: {{query_tokens: 40, num_items: 6, item_tokens: 5, label_token_ids: [198],
           delimiter: 151643}}
cases:
  - {{engine: jax, mode: single}}
  - {{engine: jax, mode: packed, mask: [dense, segment]}}
  - {{engine: jax, mode: chunked, chunk_size: 4}}
  - {{engine: jax, mode: prefill_extend, extend_batch_size: 4}}
  - {{engine: torch, mode: single}}
{extra}"""
# the packed layout of TINY's request: prefix 41 -> 64, items 6 x (5 + 1) = 36 -> 64
PACKED_T = 128


def mibench(*args, timeout=900, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "mibench.harness.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=None if env is None else {**os.environ, **env})


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def artifact(out: Path):
    paths = sorted(out.glob("*.json"))
    assert len(paths) == 1, paths
    data = json.loads(paths[0].read_text())
    jsonschema.validate(data, json.loads(COMPILE_SCHEMA_FILE.read_text()))
    record = read_compile_artifact(paths[0])
    return data, {c.case_id: c for c in record.cases}


@pytest.fixture(scope="module")
def libtpu_path():
    from mibench.harness.compile import libtpu

    try:
        return libtpu.find()
    except MibenchError as e:
        pytest.skip(f"libtpu is not available and could not be installed: {e}")


# ---- without libtpu ----------------------------------------------------------------------


def test_targets():
    t = tpu_target("v6e-4")
    assert (t.kind, t.chips, t.topology) == ("v6e", 4, "v6e:2x2")
    assert tpu_target("v5p-8").topology == "v5p:2x2x2"
    for bad in ("v6e-3", "v7x-1", "v6e", 4, "v4-8"):
        with pytest.raises(MibenchError, match="target: unknown TPU target"):
            tpu_target(bad)


@pytest.mark.parametrize("args,extra,needle", [
    ([], "", "error: --target: required: config 'compile-tiny' names no topology.target"),
    (["--target", "v6e-3"], "", "error: --target: unknown TPU target 'v6e-3'"),
    ([], "", None),  # topology.target in the config: checked where it is written
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, extra, needle):
    text = TINY.format(tp=1, extra=extra)
    if needle is None:
        text = text.replace("topology: {tp: 1}", "topology: {tp: 1, target: v6e-2}")
        needle = "c.yaml:3: topology.target: unknown TPU target 'v6e-2'"
    out = mibench("compile", write(tmp_path, text), *args, "--out", tmp_path / "out")
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and len(out.stderr.strip().splitlines()) == 1
    assert needle in out.stderr


def test_out_must_be_a_folder(tmp_path):
    (tmp_path / "file").write_text("")
    out = mibench("compile", write(tmp_path, TINY.format(tp=1, extra="")), "--target", "v6e-1",
                  "--out", tmp_path / "file")
    assert out.returncode == 2 and out.stderr.startswith("error: --out: ")


def test_torch_only_config_needs_no_libtpu(tmp_path):
    text = TINY.format(tp=1, extra="").split("cases:")[0] + \
        "cases:\n  - {engine: torch, mode: single}\n"
    text = text.replace("topology: {tp: 1}", "topology: {tp: 1, target: v5e-4}")
    out = mibench("compile", write(tmp_path, text), "--out", tmp_path / "out")
    assert out.returncode == 0, out.stderr
    data, cases = artifact(tmp_path / "out")
    assert data["target"]["name"] == "v5e-4" and data["target"]["hbm_per_chip_bytes"] == 16 << 30
    assert data["libtpu"]["source"] == "not needed (no JAX case)"
    (case,) = cases.values()
    assert case.status == "skipped" and case.error.message == "not a JAX program (torch engine)"


def test_several_configs_and_case_globs(tmp_path):
    """Each config its own artifact; `--case` globs (repeatable: a union) select across
    them; a glob that matches no case of any config is exit 2 before anything compiles."""
    head = TINY.format(tp=1, extra="").split("cases:")[0].replace(
        "topology: {tp: 1}", "topology: {tp: 1, target: v5e-4}")
    one = write(tmp_path, head.replace("compile-tiny", "one") + "cases:\n"
                "  - {engine: torch, mode: single}\n"
                "  - {engine: torch, mode: prefill_extend, extend_batch_size: 4}\n", "one.yaml")
    two = write(tmp_path, head.replace("compile-tiny", "two") + "cases:\n"
                "  - {engine: torch, mode: single, workload: {num_items: 3}}\n", "two.yaml")
    out = mibench("compile", one, two, "--case", "torch/single/*", "--case", "*/items=3*",
                  "--out", tmp_path / "out")
    assert out.returncode == 0, out.stderr
    ids = sorted(c["case_id"] for p in (tmp_path / "out").glob("*.json")
                 for c in json.loads(p.read_text())["cases"])
    assert ids == ["torch/single/tp=1", "torch/single/tp=1/items=3"]
    # each config's cases counted on stderr as they start (stdout: the tables)
    starts = [line for line in out.stderr.splitlines() if " compiling " in line]
    assert [line.split(" elapsed ")[0] for line in starts] == [
        "[1/1] compiling torch/single/tp=1", "[1/1] compiling torch/single/tp=1/items=3"]
    assert all(re.search(r" elapsed \d:\d\d:\d\d ETA \?$", line) for line in starts)
    assert "compiling" not in out.stdout.replace("compiling one", "").replace(
        "compiling two", "")
    bad = mibench("compile", one, two, "--case", "jax/*", "--out", tmp_path / "bad")
    assert bad.returncode == 2 and "error: --case: 'jax/*' matches no case" in bad.stderr
    assert not (tmp_path / "bad").exists() or not list((tmp_path / "bad").glob("*.json"))


def test_compile_is_fast_by_default():
    """No second, unrolled compile unless `--unrolled`: the worker's environment says so
    (every revision's engines read it), and so does the engine's own default."""
    from mibench.engines.compile import UNROLLED_ENV, Recorder
    from mibench.harness.compile.libtpu import LibTpuPath
    from mibench.harness.compile.worker import worker_env

    lib = LibTpuPath(path=Path("/nonexistent/libtpu.so"), version="0", source="test")
    assert worker_env(lib)[UNROLLED_ENV] == "0" and worker_env(lib, True)[UNROLLED_ENV] == "1"
    assert Recorder().unrolled is False
    help_text = mibench("compile", "--help").stdout
    assert "--unrolled" in help_text and "CONFIGS..." in help_text


# ---- compiling with libtpu ---------------------------------------------------------------


def check_ok(case, attention: str, chips: int):
    assert case.status == "ok", case.error
    c = case.compile
    assert case.resolved == {"attention": attention}
    assert len(case.topology.devices) == chips == case.topology.tp
    assert all(d.kind == "TPU v6 lite" for d in case.topology.devices)
    assert c.programs and all(p.error is None and p.memory for p in c.programs)
    assert c.fits is True and 0 < c.hbm_peak_bytes < c.hbm_per_chip_bytes
    assert c.hbm_peak_bytes == max(p.memory.resident_bytes for p in c.programs)
    assert all(p.memory.resident_bytes >= p.memory.total_bytes for p in c.programs)
    assert all(p.flops > 0 and p.bytes_accessed > 0 and p.compile_s > 0 for p in c.programs)
    assert c.flops_per_pass > 0 and c.useful_flops_per_pass > 0 and c.host.host_s_per_pass > 0
    return {p.name: p for p in c.programs}


@pytest.mark.slow
def test_tiny_config_compiles_for_v6e_1(tmp_path, libtpu_path):
    out = mibench("compile", write(tmp_path, TINY.format(tp=1, extra="")), "--target",
                  "v6e-1", "--unrolled", "--out", tmp_path / "out")
    assert out.returncode == 0, out.stdout + out.stderr
    data, cases = artifact(tmp_path / "out")
    assert data["target"]["device_kind"] == "TPU v6 lite"
    assert data["libtpu"]["version"] == libtpu_path.version
    assert cases["torch/single/tp=1"].status == "skipped"
    # tiny's parameters in bfloat16 on one chip: every program holds them as arguments
    weights = 2 * (151936 * 256 + 256 + 4 * (256 * (256 + 2 * 128) + 256 * 256 + 3 * 256 * 768
                                               + 2 * 256 + 2 * 64))
    single = check_ok(cases["jax/single/tp=1"], "pallas", 1)
    assert single["score_last_token"].calls_per_pass == 6  # one forward per item
    assert single["score_last_token"].memory.argument_bytes >= weights
    dense = check_ok(cases["jax/packed/mask=dense/tp=1"], "xla-masked", 1)
    # the dense mask is a host array copied to the chip on every pass: T x T booleans
    host = cases["jax/packed/mask=dense/tp=1"].compile.host
    assert host.to_device_by_argument["packed_dense_forward.mask_btt"] == PACKED_T ** 2
    assert dense["packed_dense_forward"].calls_per_pass == 1
    check_ok(cases["jax/packed/mask=segment/tp=1"], "pallas", 1)
    segment_host = cases["jax/packed/mask=segment/tp=1"].compile.host
    assert not any("mask" in k for k in segment_host.to_device_by_argument)
    assert segment_host.to_device_bytes_per_pass < PACKED_T ** 2
    chunked = check_ok(cases["jax/chunked/chunk_size=4/tp=1"], "pallas", 1)
    assert "int32[2," in chunked["packed_segment_forward"].signature  # 2 chunks, one batch
    extend = cases["jax/prefill_extend/extend_batch_size=4/tp=1"]
    programs = check_ok(extend, "pallas", 1)
    assert {p.name for p in extend.compile.programs} == {"prefill", "extend", "score_rows"}
    # 6 items: a batch of 4, then one of 2 (padded to the precompile size 2)
    assert sorted(p.signature.split("tokens_bl: ")[1].split(";")[0]
                  for p in extend.compile.programs if p.name == "extend") == \
        ["int32[2,8]", "int32[4,8]"]
    assert programs["prefill"].calls_per_pass == programs["score_rows"].calls_per_pass == 1
    # the LM head takes only the embedding; the layers' weights and the prefix KV cache
    # (k and v [4 layers, 1, 64, 2 heads, 64] bfloat16) stay on the chip while it runs
    head = programs["score_rows"].memory
    assert head.argument_bytes < weights and head.dropped_argument_bytes > 0
    assert head.held_bytes >= 2 * 4 * 64 * 2 * 64 * 2
    assert head.resident_bytes == head.total_bytes + head.dropped_argument_bytes + \
        head.held_bytes
    # compiled FLOPs with every scan unrolled (layers, the LM head's vocabulary chunks)
    # against the analytic useful FLOPs: measured 2.36 (segment) and 2.15 (prefill_extend)
    # at this shape, the padding (77 tokens in a packed row of 128; 6 scored rows padded to
    # 16 through a full-vocabulary head) being the waste; 1.5 to 3 allows small changes
    for case_id in ("jax/packed/mask=segment/tp=1",
                    "jax/prefill_extend/extend_batch_size=4/tp=1"):
        c = cases[case_id].compile
        assert all(p.flops_unrolled >= p.flops for p in c.programs)
        assert c.flops_unrolled_per_pass > c.flops_per_pass
        assert 1.5 < c.flops_ratio < 3.0, (case_id, c.flops_ratio)
    # the roofline's FLOPs (mibench's formulas, every layer) against XLA's unrolled count:
    # 0.91 to 0.99 measured at this shape (norms, RoPE and softmax are not in the formulas)
    for case in cases.values():
        if case.engine == "jax":
            r = case.compile.roofline
            assert r.chips == 1 and r.items == 6 and r.items_per_s > 0
            assert 0.85 < r.flops_per_pass / case.compile.flops_unrolled_per_pass < 1.05, \
                (case.case_id, r.flops_per_pass, case.compile.flops_unrolled_per_pass)
    # its mask bytes are the compile's own count of the dense mask copied every pass
    assert cases["jax/packed/mask=dense/tp=1"].compile.roofline.mask_bytes_per_pass == \
        host.to_device_by_argument["packed_dense_forward.mask_btt"]
    # the command's table: one line per case
    assert "jax/packed/mask=dense/tp=1" in out.stdout and "artifact:" in out.stdout
    # libtpu stays out of the environment: a plain JAX process sees only its CPU
    plain = subprocess.run([sys.executable, "-c", "import jax; print(jax.devices()[0].platform)"],
                           capture_output=True, text=True, timeout=120)
    assert plain.stdout.strip() == "cpu" and "tpu" not in plain.stderr.lower()


@pytest.mark.slow
def test_tiny_config_compiles_for_v6e_4_and_a_refused_case_fails_alone(tmp_path, libtpu_path):
    # `auto` is the pallas kernel at tp 4 too, per chip on its own heads (a shard_map: the
    # compiler refuses a Pallas kernel it would have to partition itself); the xla path
    # side by side; cudnn on a TPU is refused by the engine: that case fails, the others run
    extra = ("  - {engine: jax, mode: packed, mask: segment, attention: [xla, cudnn]}\n"
             "  - {engine: jax, mode: prefill_extend, extend_batch_size: 4, mask: dense}\n")
    out = mibench("compile", write(tmp_path, TINY.format(tp=4, extra=extra)), "--target",
                  "v6e-4", "--out", tmp_path / "out")
    assert out.returncode == 3, out.stdout + out.stderr
    _, cases = artifact(tmp_path / "out")
    refused = cases["jax/packed/mask=segment/attention=cudnn/tp=4"]
    assert refused.status == "failed" and refused.compile is None
    assert refused.error.message.startswith("attention: cudnn flash attention needs a CUDA "
                                            "GPU")
    assert "\n" not in refused.error.message
    for case_id in ("jax/single/tp=4", "jax/packed/mask=dense/tp=4",
                    "jax/packed/mask=segment/tp=4", "jax/chunked/chunk_size=4/tp=4",
                    "jax/prefill_extend/extend_batch_size=4/tp=4",
                    "jax/prefill_extend/mask=dense/extend_batch_size=4/tp=4"):
        case = cases[case_id]
        dense = "dense" in case_id
        check_ok(case, "xla-masked" if dense else "pallas", 4)
        assert case.topology.mesh_shape == {"tp": 4}
    check_ok(cases["jax/packed/mask=segment/attention=xla/tp=4"], "xla", 4)
    # the dense extend passes its [B, L, P + L] mask from the host on every call: 4 x 8 x
    # (64 + 8) booleans for the batch of 4, 2 x 8 x 72 for the last 2 items
    host = cases["jax/prefill_extend/mask=dense/extend_batch_size=4/tp=4"].compile.host
    assert host.to_device_by_argument["extend_dense.mask_bls"] == (4 + 2) * 8 * 72
    assert cases["torch/single/tp=4"].status == "skipped"


@pytest.mark.slow
def test_packed_dense_out_of_hbm_on_v5e_is_a_failed_case(tmp_path, libtpu_path):
    """Packed dense on the seeds' shape but 700 items (qwen3-0.6b, query 2000, items of
    20): its T x T scores need more HBM than a v5e chip has, which the compiler says."""
    config = write(tmp_path, """\
name: dense-v5e
model: {path: "embedded:qwen3-0.6b", dtype: bfloat16}
topology: {tp: 1, target: v5e-1}
workload: {query_tokens: 2000, num_items: 700, item_tokens: 20, label_token_ids: [198],
           delimiter: 151643}
cases:
  - {engine: jax, mode: packed, mask: dense}
""")
    out = mibench("compile", config, "--out", tmp_path / "out")
    assert out.returncode == 3, out.stdout + out.stderr
    data, cases = artifact(tmp_path / "out")
    (case,) = cases.values()
    assert data["target"]["hbm_per_chip_bytes"] == 16 << 30
    assert case.status == "failed" and case.compile.fits is False
    assert "RESOURCE_EXHAUSTED" in case.error.message and "HBM" in case.error.message
    assert case.error.message.startswith("packed_dense_forward: ")
    (program,) = case.compile.programs
    assert program.error and program.memory is None
    # the mask it would copy to the chip per pass: T x T booleans, T = 2048 + 14860 (the
    # item region, 700 x 21 tokens bucketed to 14848, rounded up to the band of 20)
    assert program.host_to_device_bytes["mask_btt"] == (2048 + 14860) ** 2


@pytest.mark.slow
def test_a_worker_killed_fails_its_case_and_the_next_gets_a_fresh_one(tmp_path, libtpu_path):
    text = TINY.format(tp=1, extra="").split("cases:")[0] + """cases:
  - {engine: jax, mode: single, runs: {timeout_s: 0.01}}
  - {engine: jax, mode: packed, mask: segment}
"""
    out = mibench("compile", write(tmp_path, text), "--target", "v6e-1", "--out",
                  tmp_path / "out")
    assert out.returncode == 3, out.stdout + out.stderr
    _, cases = artifact(tmp_path / "out")
    killed = cases["jax/single/tp=1"]
    assert killed.status == "failed" and killed.error.type == "WorkerDied"
    assert killed.error.message.startswith("compiling exceeded runs.timeout_s=0.01")
    check_ok(cases["jax/packed/mask=segment/tp=1"], "pallas", 1)


# ---- compare and report on compile artifacts (no libtpu: a stored tiny v6e-1 artifact) ---

STORED = Path(__file__).parent / "data" / "compile-tiny-v6e-1.json"


def edited(tmp_path: Path, name: str, edit) -> Path:
    data = json.loads(STORED.read_text())
    edit(data)
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def case_of(data: dict, case_id: str) -> dict:
    return next(c for c in data["cases"] if c["case_id"] == case_id)


def test_compare_identical_compile_artifacts_pass(tmp_path):
    out = mibench("compare", STORED, edited(tmp_path, "same.json", lambda d: None))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "No regression." in out.stdout and "REGRESSION" not in out.stdout


@pytest.mark.parametrize("edit,needle", [
    (lambda d: case_of(d, "jax/packed/mask=segment/tp=1")["compile"].update(
        bytes_accessed_per_pass=case_of(d, "jax/packed/mask=segment/tp=1")["compile"]
        ["bytes_accessed_per_pass"] * 1.2), "bytes accessed"),
    (lambda d: case_of(d, "jax/packed/mask=segment/tp=1")["compile"].update(
        fits=False), "stopped fitting"),
    (lambda d: case_of(d, "jax/packed/mask=segment/tp=1").update(
        status="failed", error={"type": "CompileError", "message": "x: RESOURCE_EXHAUSTED",
                                "traceback": ""}), "stopped compiling"),
])
def test_compare_compile_regression_names_the_case(tmp_path, edit, needle):
    out = mibench("compare", STORED, edited(tmp_path, "new.json", edit))
    assert out.returncode == 1, out.stdout + out.stderr
    line = next(ln for ln in out.stdout.splitlines() if "REGRESSION" in ln)
    assert line.startswith("| jax/packed/mask=segment/tp=1 |") and needle in line
    assert "**Regression** in jax/packed/mask=segment/tp=1." in out.stdout


def test_compare_compile_within_cost_threshold_passes(tmp_path):
    def grow(d):
        c = case_of(d, "jax/single/tp=1")["compile"]
        c["hbm_peak_bytes"] = int(c["hbm_peak_bytes"] * 1.04)
    new = edited(tmp_path, "new.json", grow)
    out = mibench("compare", STORED, new)
    assert out.returncode == 0 and "(+4.0%)" in out.stdout, out.stdout + out.stderr
    out = mibench("compare", STORED, new, "--threshold", "cost=3%")
    assert out.returncode == 1 and "jax/single/tp=1" in out.stdout


@pytest.mark.parametrize("edit,needle", [
    (lambda d: d["target"].update(name="v6e-4"), "target differs: v6e-1 vs v6e-4"),
    (lambda d: d["libtpu"].update(version="0.0.1"), "libtpu differs"),
    (lambda d: d["provenance"]["packages"].update(jax="0.0.1"), "jax differs"),
])
def test_compare_compile_other_compiler_is_exit_2(tmp_path, edit, needle):
    out = mibench("compare", STORED, edited(tmp_path, "new.json", edit))
    assert out.returncode == 2 and out.stdout == "", out.stdout + out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr


def test_report_compile_artifacts_renders_the_tpu_fit_table(tmp_path):
    v6e4 = edited(tmp_path, "v6e4.json", lambda d: d["target"].update(name="v6e-4"))
    out = mibench("report", STORED, v6e4)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("# TPU fit")
    assert "| case | v6e-1 | v6e-4 |" in out.stdout
    row = next(ln for ln in out.stdout.splitlines()
               if ln.startswith("| jax/packed/mask=segment/tp=1 |"))
    assert row.count("/ 32 GiB") == 2 and "fits" in row
    assert "| torch/single/tp=1 | skipped | skipped |" in out.stdout


# ---- the shipped TPU configs compile (tiny model, small workload, few extend buckets) -----

CONFIGS = Path(__file__).parents[1] / "configs"
SMALL = ["--set", "model.path=embedded:tiny", "--set", "workload.query_tokens=64",
         "--set", "workload.num_items=12", "--set", "workload.item_tokens=8"]


@pytest.mark.slow
@pytest.mark.parametrize("config,target,extend", [
    ("v6e1.yaml", "v6e-1", 2),  # v6e-4 and v6e-8: nox -s scenarios (the small version:
    # test_tiny_config_compiles_for_v6e_4_and_a_refused_case_fails_alone)
    pytest.param("v6e4.yaml", "v6e-4", 4, marks=pytest.mark.scenario),
    pytest.param("v6e8.yaml", "v6e-8", 3, marks=pytest.mark.scenario)])
def test_shipped_tpu_configs_compile_small(tmp_path, libtpu_path, config, target, extend):
    # v6e1's dense extend sweep (8 to 64, six cases of the same programs at other batch
    # sizes) at its two ends; nox -s compile compiles the whole sweep at full size
    sweep = ["--set", "cases.5.extend_batch_size=[8, 64]"] if config == "v6e1.yaml" else []
    out = mibench("compile", CONFIGS / config, "--target", target, *SMALL, *sweep,
                  "--set", f"cases.{extend}.extend_batch_size=4",
                  "--set", f"cases.{extend}.precompile_bs=[1,4]", "--out", tmp_path / "out")
    assert out.returncode == 0, out.stdout + out.stderr
    data, cases = artifact(tmp_path / "out")
    chips = data["target"]["chips"]
    jax_cases = [c for c in cases.values() if c.engine == "jax"]
    assert jax_cases and all(c.topology.tp == chips for c in jax_cases)
    for case in jax_cases:
        assert case.status == "ok" and case.compile.fits is True, case.error
        assert case.compile.roofline.items_per_s > 0  # the bound of every compiled case
    assert data["references"]["name"] == "seeds"  # the config's figures, for the report
    # a compile artifact compared with itself passes the gate; its report renders
    (path,) = (tmp_path / "out").glob("*.json")
    assert mibench("compare", path, path).returncode == 0
    assert f"| case | {target} |" in mibench("report", path).stdout


# ---- mibench ab with a TPU target --------------------------------------------------------

AB = """\
name: ab-compile
model: {path: "embedded:tiny", dtype: bfloat16}
workload: {query_tokens: 40, num_items: 6, item_tokens: 5, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 2}
cases:
  - {engine: jax, mode: prefill_extend, extend_batch_size: 4}
  - {engine: torch, mode: single}
"""


# a long scenario (nox -s scenarios); its small version:
# test_compare_compile_regression_names_the_case (the gate on artifacts)
@pytest.mark.scenario
@pytest.mark.slow
def test_ab_compiles_both_revisions_and_gates_compiled_cost(tmp_path, libtpu_path):
    """A commit that pads items to 16 tokens instead of 4 grows the compiled extend program:
    `mibench ab --target v6e-1` compiles each revision with its own engines and fails the
    case on the exact cost, even with one (untested) timing round."""
    from typer.testing import CliRunner

    from mibench.harness.ab.scratch import commit, copy_project
    from mibench.harness.cli import app

    repo = tmp_path / "repo"
    repo.mkdir()
    copy_project(Path(__file__).resolve().parents[1], repo)
    base = commit(repo, "base")
    layout = repo / "engines/modes/layout.py"
    old = "return -(-n // 4) * 4 if n <= 64"
    assert old in layout.read_text()
    layout.write_text(layout.read_text().replace(old, "return -(-n // 16) * 16 if n <= 64"))
    bigger = commit(repo, "items padded to 16 tokens")
    config = write(tmp_path, AB)
    env = {"MIBENCH_CACHE": str(tmp_path / "cache"), "MIBENCH_LIBTPU": str(libtpu_path.path)}
    out = mibench("ab", base, bigger, config, "--rounds", "1", "--target", "v6e-1",
                  "--out", tmp_path / "o", env=env, cwd=repo)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Compiled cost for v6e-1" in out.stdout
    from mibench.harness.records.ab import read_ab

    (path,) = (tmp_path / "o").glob("*.json")
    record = read_ab(path)
    assert record.compile_target.name == "v6e-1" and record.libtpu.version
    extend, torch = record.cases
    assert torch.cost is None  # not a JAX program
    assert extend.verdict == "regression" and "compiled cost" in extend.why, extend.why
    assert extend.cost.base.status == extend.cost.new.status == "ok"
    assert any(r.startswith("FLOPs") for r in extend.cost.regressions), \
        extend.cost.regressions
    a, b = extend.cost.base.compile, extend.cost.new.compile
    assert b.flops_per_pass > 1.05 * a.flops_per_pass
    report = CliRunner().invoke(app, ["report", str(path), "--out", str(tmp_path / "r.md")])
    assert report.exit_code == 0, report.output
    assert "## Compiled cost for v6e-1" in (tmp_path / "r.md").read_text()

"""Damaged or edited models never give silent wrong scores.

Embedded presets are repaired (regenerated, atomically) when their folder no longer matches
its manifest; any checkpoint is checked against its config.json at load (missing, unused,
misshapen tensors; truncated files); `mibench model verify` checks everything and changes
nothing. Each test works on a copy of the embedded `tiny` folder in a cache under tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import DELIM, LABELS

from mibench.engines import ModelError, load_engine, model_cache
from mibench.engines import embedded as emb
from mibench.engines.checkpoint import verify_model

QUERY, ITEMS = [5, 6, 7, 8, 9, 10], [[11, 12], [13], [14, 15, 16]]
WEIGHTS = "model.safetensors"


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.iterdir()) if p.name != model_cache.MANIFEST}


def _scores(model="embedded:tiny", engine="jax"):
    return np.array(load_engine(engine, model=str(model)).score(
        QUERY, ITEMS, LABELS, delimiter=DELIM).scores)


def _verify(spec):
    """`mibench model verify SPEC` -> (exit code, stdout, stderr)."""
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    result = CliRunner().invoke(app, ["model", "verify", str(spec)])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="session")
def pristine(tmp_path_factory):
    """(folder, digests, scores) of a freshly generated `tiny` (with its manifest)."""
    cache = tmp_path_factory.mktemp("pristine-cache")
    old = os.environ.get("MIBENCH_CACHE")
    os.environ["MIBENCH_CACHE"] = str(cache)
    try:
        folder = model_cache.ensure_embedded("tiny")
        scores = _scores()
    finally:
        if old is None:
            del os.environ["MIBENCH_CACHE"]
        else:
            os.environ["MIBENCH_CACHE"] = old
    return folder, _digests(folder), scores


@pytest.fixture
def cache(tmp_path, monkeypatch, pristine):
    """The `tiny` folder of a copy of the pristine cache, which MIBENCH_CACHE points at."""
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    folder = model_cache.embedded_folder("tiny")
    shutil.copytree(pristine[0], folder)  # keeps mtimes (ctimes are new: hashed once)
    yield folder
    shutil.rmtree(tmp_path / "cache", ignore_errors=True)  # 170 MB per test


@pytest.fixture
def plain(tmp_path, pristine):
    """A plain checkpoint folder (a copy of tiny without its manifest)."""
    folder = tmp_path / "plain"
    shutil.copytree(pristine[0], folder)
    (folder / model_cache.MANIFEST).unlink()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    if "rope_theta" in changes:
        cfg["rope_parameters"]["rope_theta"] = changes["rope_theta"]
    (folder / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


def _assert_repaired(folder, pristine):
    np.testing.assert_allclose(_scores(), pristine[2], rtol=1e-6, atol=0)
    assert _digests(folder) == pristine[1]
    assert sorted(os.listdir(folder.parent)) == [".tiny-g1.lock", "tiny-g1"]  # no leftovers
    assert _verify("embedded:tiny")[0] == 0


def _assert_one_line_error(code, out, err, needle):
    assert code == 2 and out == "", (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], err


def test_intact_folder_passes_the_cheap_check_without_hashing(cache, monkeypatch):
    model_cache.ensure_embedded("tiny")  # the copy's ctimes are new: hashed once, then restamped
    manifest = (cache / model_cache.MANIFEST).read_text()

    def no_hashing(path):
        raise AssertionError(f"hashed {path}")

    with monkeypatch.context() as m:
        m.setattr(model_cache, "_sha256", no_hashing)
        assert model_cache.ensure_embedded("tiny") == cache
    assert (cache / model_cache.MANIFEST).read_text() == manifest
    code, out, _ = _verify("embedded:tiny")
    assert code == 0 and out.startswith(f"ok: {cache}: qwen3, 4 layers, 46 tensors")
    assert out.rstrip().endswith("4 files match mibench-manifest.json (sha256)")


@pytest.mark.slow
@pytest.mark.parametrize("change", [{"num_hidden_layers": 2}, {"rope_theta": 10000.0}])
def test_edited_config_is_caught_and_repaired(cache, pristine, change):
    _edit_config(cache, **change)
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, f"{cache / 'config.json'}: ")
    assert "regenerated on the next load of embedded:tiny" in err
    _assert_repaired(cache, pristine)


def test_edited_rope_theta_would_change_the_scores(plain, pristine):
    """The threat is real: the edited config loads as a valid checkpoint with other scores."""
    _edit_config(plain, rope_theta=10000.0)
    assert not np.allclose(_scores(plain), pristine[2], rtol=1e-3)


def test_edited_copy_of_an_embedded_folder_is_refused(tmp_path, pristine):
    """A copy loaded by path keeps its manifest: an edit is an error, not other scores."""
    folder = tmp_path / "copy"
    shutil.copytree(pristine[0], folder)
    _edit_config(folder, rope_theta=10000.0)
    with pytest.raises(ModelError) as err:
        load_engine("jax", model=str(folder))
    assert err.value.field == str(folder / "config.json")
    assert "delete mibench-manifest.json" in str(err.value)
    code, out, stderr = _verify(folder)
    _assert_one_line_error(code, out, stderr, f"{folder / 'config.json'}: size")
@pytest.mark.slow


def test_same_size_overwrite_is_caught_even_with_mtime_restored(cache, pristine):
    weights = cache / WEIGHTS
    model_cache.ensure_embedded("tiny")  # restamp the copy: from here on the cheap path is exact
    st = weights.stat()
    with open(weights, "r+b") as f:
        f.seek(4 * 1024**2)
        f.write(os.urandom(16 * 1024))
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (weights.stat().st_size, weights.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, f"{weights}: content differs from the manifest")
    # the load sees the new ctime (it cannot be set back), hashes, and regenerates
    _assert_repaired(cache, pristine)


def test_stat_identical_edit_is_caught_by_verify(cache):
    """Where stat cannot tell (an edit with size, mtime and ctime as recorded, simulated by
    restamping the manifest), only the full hash of `model verify` catches it."""
    weights = cache / WEIGHTS
    with open(weights, "r+b") as f:
        f.seek(4 * 1024**2)
        f.write(os.urandom(16 * 1024))
    manifest = json.loads((cache / model_cache.MANIFEST).read_text())
    st = weights.stat()
    manifest["files"][WEIGHTS].update(mtime_ns=st.st_mtime_ns, ctime_ns=st.st_ctime_ns)
    (cache / model_cache.MANIFEST).write_text(json.dumps(manifest))
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, f"{weights}: content differs from the manifest")
@pytest.mark.slow


def test_cli_score_on_overwritten_weights_gives_the_pristine_scores(cache, pristine, tmp_path):
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    with open(cache / WEIGHTS, "r+b") as f:
        f.seek(8 * 1024**2)
        f.write(bytes(16 * 1024))
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"query": QUERY, "items": ITEMS}))
    result = CliRunner().invoke(app, ["score", "--request", str(request), "--labels",
                                      ",".join(map(str, LABELS)), "--delimiter", str(DELIM)])
    assert result.exit_code == 0, result.output
    scores = np.array(json.loads(result.stdout)["scores"])
    np.testing.assert_allclose(scores, pristine[2], rtol=1e-6, atol=0)
    assert "regenerating it" in result.stderr
@pytest.mark.slow


def test_truncated_weights_are_repaired(cache, pristine):
    with open(cache / WEIGHTS, "r+b") as f:
        f.truncate(10**6)
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, f"{cache / WEIGHTS}: size 1000000 bytes")
    _assert_repaired(cache, pristine)


@pytest.mark.parametrize("engine", ["jax", "torch"])
def test_truncated_checkpoint_is_one_line_naming_the_file(plain, engine):
    with open(plain / WEIGHTS, "r+b") as f:
        f.truncate(10**6)
    with pytest.raises(ModelError) as err:
        load_engine(engine, model=str(plain))
    assert err.value.field == str(plain / WEIGHTS) and "truncated" in str(err.value)
    code, out, stderr = _verify(plain)
    _assert_one_line_error(code, out, stderr, f"{plain / WEIGHTS}: truncated safetensors")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["config.json", WEIGHTS, model_cache.MANIFEST])
def test_deleted_file_is_regenerated(cache, pristine, name):
    (cache / name).unlink()
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, f"{cache / name}: missing")
    _assert_repaired(cache, pristine)


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["fingerprint", "garbage", "extra file"])
def test_other_manifest_mismatches_regenerate(cache, pristine, damage):
    manifest = cache / model_cache.MANIFEST
    if damage == "fingerprint":  # made by another definition of the preset
        manifest.write_text(manifest.read_text().replace(emb.fingerprint("tiny"), "0" * 64))
    elif damage == "garbage":
        manifest.write_text("{not json")
    else:
        (cache / "generation_config.json").write_text("{}")
    assert model_cache.manifest_problems(cache, "tiny")
    assert _verify("embedded:tiny")[0] == 2
    _assert_repaired(cache, pristine)


def _rewrite_weights(folder, edit):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(folder / WEIGHTS)
    edit(tensors)
    save_file(tensors, folder / WEIGHTS, metadata={"format": "pt"})


@pytest.mark.parametrize("engine", ["jax", "torch"])
def test_unused_tensor_is_an_error(plain, engine):
    _rewrite_weights(plain, lambda t: t.update(
        {"model.layers.0.self_attn.o_proj.bias": np.ones(256, np.float32)}))
    with pytest.raises(ModelError, match=r"1 unused\): unused tensor "
                                         r"model\.layers\.0\.self_attn\.o_proj\.bias$"):
        load_engine(engine, model=str(plain))


def test_missing_unused_and_misshapen_tensors_are_all_listed(plain):
    def edit(t):
        del t["model.layers.1.mlp.up_proj.weight"], t["model.norm.weight"]
        t["model.layers.2.self_attn.q_norm.weight"] = np.ones(32, np.float32)
        t["model.layers.3.mlp.down_proj.weight"] = t["model.layers.3.mlp.down_proj.weight"].T
        t["lm_head.weight"] = t["model.embed_tokens.weight"]

    _rewrite_weights(plain, edit)
    with pytest.raises(ModelError) as err:
        load_engine("jax", model=str(plain))
    msg = str(err.value)
    assert "(2 missing, 1 unused, 2 misshapen)" in msg and "\n" not in msg
    for needle in ("missing tensor model.layers.1.mlp.up_proj.weight",
                   "missing tensor model.norm.weight", "unused tensor lm_head.weight",
                   "model.layers.2.self_attn.q_norm.weight: shape (32,), expected (64,)",
                   "model.layers.3.mlp.down_proj.weight: shape (768, 256), expected (256, 768)"):
        assert needle in msg
    code, out, stderr = _verify(plain)
    _assert_one_line_error(code, out, stderr, "missing tensor model.norm.weight")


def test_fewer_layers_in_config_lists_every_unused_tensor(plain):
    _edit_config(plain, num_hidden_layers=2)
    with pytest.raises(ModelError) as err:
        load_engine("jax", model=str(plain))
    msg = str(err.value)
    assert "(22 unused)" in msg
    names = [f"model.layers.{i}.{n}" for i in (2, 3) for n in (
        "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "self_attn.q_norm.weight",
        "self_attn.k_norm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight",
        "mlp.up_proj.weight", "mlp.down_proj.weight")]
    assert all(f"unused tensor {name}" in msg for name in names)


def test_sharded_checkpoint_with_a_missing_shard(tmp_path, monkeypatch):
    monkeypatch.setattr(emb, "SHARD_BYTES", 64 * 1024**2)
    folder = emb.make_model("tiny", tmp_path / "sharded")
    assert verify_model(str(folder)).startswith(f"ok: {folder}: qwen3, 4 layers, 46 tensors in 2")
    shard = sorted(folder.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(ModelError) as err:
        load_engine("jax", model=str(folder))
    assert err.value.field == str(shard) and "are missing" in str(err.value)


def test_verify_does_not_generate(tmp_path, monkeypatch):
    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "empty"))
    code, out, err = _verify("embedded:tiny")
    _assert_one_line_error(code, out, err, "not in the cache yet")
    assert not (tmp_path / "empty").exists()
    _assert_one_line_error(*_verify("embedded:nope"), "unknown preset 'nope'")
    _assert_one_line_error(*_verify(tmp_path / "nowhere"), "no such checkpoint folder")


_LOAD = ("import hashlib; from mibench.engines.checkpoint import resolve_model; "
         "f = resolve_model('embedded:tiny'); "
         "print({p.name: hashlib.sha256(p.read_bytes()).hexdigest() "
         "for p in sorted(f.iterdir()) if p.name != 'mibench-manifest.json'})")


@pytest.mark.parametrize("start", ["missing", "damaged"])
@pytest.mark.slow
def test_concurrent_regeneration(tmp_path, pristine, start):
    """Two processes load the same missing (or damaged) preset at once: both succeed with
    identical files and leave nothing behind."""
    env = {**os.environ, "MIBENCH_CACHE": str(tmp_path / "cache")}
    if start == "damaged":
        folder = tmp_path / "cache" / "embedded" / "tiny-g1"
        shutil.copytree(pristine[0], folder)
        (folder / "config.json").unlink()
    procs = [subprocess.Popen([sys.executable, "-c", _LOAD], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0] == f"{pristine[1]}\n"
    assert sorted(os.listdir(tmp_path / "cache" / "embedded")) == [".tiny-g1.lock", "tiny-g1"]
    shutil.rmtree(tmp_path / "cache")
@pytest.mark.slow


def test_racing_regenerations_without_the_lock(cache, pristine, monkeypatch):
    """The rename protocol alone (no lock, e.g. a filesystem without flock) is safe: three
    threads replace the same damaged folder at once, none sees an error."""
    import contextlib

    monkeypatch.setattr(model_cache, "_generation_lock",
                        lambda final: contextlib.nullcontext(False))
    (cache / "config.json").unlink()
    barrier, errors = threading.Barrier(3), []

    def load():
        barrier.wait()
        try:
            assert model_cache.ensure_embedded("tiny") == cache
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=load) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert _digests(cache) == pristine[1] and not model_cache.manifest_problems(cache, "tiny")
    assert [n for n in os.listdir(cache.parent) if ".tmp-" in n] == []


def test_install_keeps_a_good_folder_another_process_installed(cache, tmp_path):
    model_cache.ensure_embedded("tiny")
    tmp = tmp_path / "cache" / "embedded" / ".tiny-g1.tmp-x"
    tmp.mkdir()
    (tmp / "config.json").write_text("{}")
    model_cache._install(tmp, cache, "tiny")  # the folder there verifies: kept, tmp left to caller
    assert tmp.exists() and not model_cache.manifest_problems(cache, "tiny")
    (cache / "config.json").unlink()  # now it does not verify: replaced
    model_cache._install(tmp, cache, "tiny")
    assert sorted(os.listdir(cache)) == ["config.json"]
    assert [n for n in os.listdir(cache.parent) if ".old-" in n] == []


def test_special_ids_are_remembered_by_the_tokenizers_files(tmp_path, monkeypatch, pristine):
    """A JAX engine's special ids (the random workload leaves them out) without loading the
    tokenizer again, which imports transformers and torch in every worker: the ids
    load_tokenizer gives, remembered under the folder's files but its weights."""
    from mibench.engines import checkpoint

    monkeypatch.setenv("MIBENCH_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(pristine[0] / name, folder / name)
    loads = []

    def ids(f):
        loads.append(f)
        return checkpoint.special_ids(checkpoint.load_tokenizer(f))

    assert model_cache.cached_special_ids(folder, ids) == {151643}  # eos and pad
    (folder / WEIGHTS).write_bytes(b"weights: never read for the key")
    assert model_cache.cached_special_ids(folder, ids) == {151643} and len(loads) == 1
    # another special token in the tokenizer's config: other files, other ids
    config = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(
        json.dumps({**config, "bos_token": "<|im_start|>"}))
    assert model_cache.cached_special_ids(folder, ids) == {151643, 151644} and len(loads) == 2
    # an unreadable cache entry is passed by: loaded again
    for entry in (tmp_path / "cache" / model_cache.SPECIAL_IDS).iterdir():
        entry.write_text("not json")
    assert model_cache.cached_special_ids(folder, ids) == {151643, 151644} and len(loads) == 3

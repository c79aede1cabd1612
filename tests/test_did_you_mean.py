"""'Did you mean' (difflib) where a name is mistyped: an unknown config key names the closest
allowed ones, a missing file the closest names beside it, and a `--case` glob that matches
nothing lists every case id, the closest first (a count after the closest ten when there are
more than 40)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from mibench.errors import MibenchError, closest_first
from mibench.harness.cli import app
from mibench.harness.config.matrix import select_cases

ROOT = Path(__file__).resolve().parents[1]
CPU = ROOT / "configs" / "cpu.yaml"


def error(*args) -> str:
    out = CliRunner().invoke(app, [str(a) for a in args])
    assert out.exit_code == 2, out.output
    (line,) = out.stderr.splitlines()
    return line


@pytest.mark.parametrize("key,guess", [
    ("workload.num_itemz=3", "workload.num_itemz: unknown key; did you mean 'num_items'?"),
    ("cases.3.extend_bach_size=4", "unknown key; did you mean 'extend_batch_size'?"),
    ("parity.chekcs=[modes]", "parity.chekcs: unknown key; did you mean 'checks'?"),
])
def test_unknown_config_key(key, guess):
    line = error("validate", CPU, "--set", key)
    assert guess in line and "(allowed: " in line  # the whole list still follows


def test_no_guess_when_nothing_is_close():
    line = error("validate", CPU, "--set", "workload.zzz=1")
    assert "did you mean" not in line and "unknown key (allowed: " in line


def test_missing_file_names_its_neighbours(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert error("validate", "configs/cpu-smok.yaml").startswith(
        "error: configs/cpu-smok.yaml: no such config file; did you mean "
        "'configs/cpu-smoke.yaml'")
    (tmp_path / "base.json").write_text("{}")
    line = error("compare", tmp_path / "bsae.json", tmp_path / "base.json")
    assert f"did you mean '{tmp_path / 'base.json'}'?" in line
    assert "did you mean" not in error("validate", tmp_path / "nowhere" / "x.yaml")
    (tmp_path / "artifacts").mkdir()
    assert f"did you mean '{tmp_path / 'artifact'}s'" in error("history",
                                                              tmp_path / "artifact")


def cases(ids):
    return [SimpleNamespace(case_id=i) for i in ids]


def test_case_glob_lists_every_case_closest_first():
    ids = [f"jax/chunked/chunk_size={n}/tp=1" for n in (4, 8, 16, 32, 64, 128)] + [
        "jax/packed/mask=dense/tp=1", "jax/prefill_extend/extend_batch_size=12/tp=1",
        "torch/single/tp=1"]
    with pytest.raises(MibenchError) as e:
        select_cases(cases(ids), ["jax/prefil_extend*"])
    message = e.value.message
    assert message.startswith("'jax/prefil_extend*' matches no case of the config; its 9 "
                              "case(s), the closest first: jax/prefill_extend/")
    assert all(i in message for i in ids)  # every one: the old error showed 5 and '...'


def test_case_glob_over_40_cases_counts_the_rest():
    ids = [f"jax/chunked/chunk_size={n}/tp=1" for n in range(1, 60)]
    listed = closest_first("jax/chunked/chunk_size=7*", ids)
    assert listed.startswith("jax/chunked/chunk_size=7/tp=1, ")
    assert listed.endswith(", ... and 49 more") and listed.count(", ") == 10
    assert closest_first("x", ids[:40]).count(", ") == 39  # 40 or fewer: all of them


def test_case_glob_on_the_command_line():
    line = error("run", CPU, "--case", "torch/singel*", "--out", "/tmp/unused")
    assert "matches no case of the config; its 8 case(s), the closest first: " \
           "torch/single/tp=1/items=25, " in line


def test_missing_folder_names_its_neighbours(tmp_path):
    (tmp_path / "history").mkdir()
    for args in (["regressions", tmp_path / "histroy"], ["site", tmp_path / "histroy", "--out",
                                                        tmp_path / "site"],
                 ["accept", tmp_path / "histroy", "--case", "x", "--by", "a", "--why", "b"]):
        assert error(*args).endswith(f"; did you mean '{tmp_path / 'history'}'?")
    assert "did you mean" not in error("regressions", tmp_path / "history")  # it exists

"""mibench/registry.py: the one registry style of every extension point."""

import pytest

from mibench.errors import MibenchError
from mibench.registry import Registry


def test_add_register_order_and_lookup():
    reg = Registry("format", field="--format")
    reg.add("csv", 1)

    @reg.register("json")
    def json_export():
        return "j"

    assert list(reg) == ["csv", "json"] and len(reg) == 2
    assert reg["csv"] == 1 and reg.lookup("json") is json_export
    assert "csv" in reg and "xml" not in reg and reg.get("xml") is None


def test_unknown_name_says_what_is_known_and_the_closest():
    reg = Registry("format", field="--format")
    for name in ("csv", "json", "bmf"):
        reg.add(name, name.upper())
    with pytest.raises(MibenchError) as e:
        reg.lookup("jsn")
    assert str(e.value) == ("--format: unknown format 'jsn' (known: csv, json, bmf); "
                            "did you mean 'json'?")
    with pytest.raises(MibenchError, match="unknown format 3"):
        reg.lookup(3)


def test_a_name_twice_is_refused():
    reg = Registry("wire")
    reg.add("sglang", object)
    with pytest.raises(ValueError, match="wire 'sglang' is registered twice"):
        reg.add("sglang", object)


def test_lazy_entries_import_on_first_lookup_and_fill_runs_once():
    calls = []

    def fill(r):
        calls.append(1)
        r.add("dumps", "json:dumps")

    reg = Registry("codec", fill=fill)
    assert calls == []
    import json
    assert reg.lookup("dumps") is json.dumps and reg["dumps"] is json.dumps
    assert list(reg) == ["dumps"] and calls == [1]


def test_where_says_what_the_names_belong_to():
    reg = Registry("mode", field="mode", where="for engine torch")
    reg.add("single", 1)
    with pytest.raises(MibenchError) as e:
        reg.lookup("packed")
    assert str(e.value) == "mode: unknown mode 'packed' for engine torch (known: single)"


def test_each_engine_declares_its_packages_once_for_every_reader():
    """An engine's packages are declared beside its registry line: the versions a record
    keeps and the modules the GPU job checks are read from there, in that order."""
    from mibench.engines import ENGINE_PACKAGES, ENGINES
    from mibench.engines.env import packages
    from mibench.harness.jobs.gpu_job import NEEDED

    assert list(ENGINE_PACKAGES) == list(ENGINES)
    own = [p for names in ENGINE_PACKAGES.values() for p in names]
    assert "jax" in own and "torch" in own
    assert [p for p in packages() if p in own] == own == [p for p in NEEDED if p in own]
    assert packages()[0] == "mibench"


def test_the_registries_name_what_their_readers_know():
    """Engines: the same names in the same order as their modes; parity checks: exactly the
    names a config and a record may hold (records/run.py CHECKS, the schema's)."""
    from mibench.engines import ENGINES, MODES
    from mibench.harness.records.run import CHECKS
    from mibench.harness.run.parity import PARITY_CHECKS

    assert list(ENGINES) == list(MODES) == ["jax", "torch", "http"]
    assert sorted(PARITY_CHECKS) == sorted(CHECKS)
    assert all(c.each_case or c.group for c in PARITY_CHECKS.values())
    with pytest.raises(MibenchError, match="^parity.checks: unknown parity check 'isolaton'.*"
                       "did you mean 'isolation'"):
        PARITY_CHECKS.lookup("isolaton")


def test_an_entry_for_a_with_block_is_added_or_replaced_then_as_before():
    reg = Registry("mode")
    reg.add("single", 1)
    reg.add("packed", 2)
    with reg.entry("chunked", 3):
        assert list(reg.items()) == [("single", 1), ("packed", 2), ("chunked", 3)]
    assert "chunked" not in reg
    with pytest.raises(RuntimeError), reg.entry("single", 9):
        assert reg.lookup("single") == 9
        raise RuntimeError("the block fails")
    assert list(reg.items()) == [("single", 1), ("packed", 2)]  # restored, in its place

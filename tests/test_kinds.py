"""Case kinds (harness/case_kinds.py): the registry from engine to kind, the fields each
owns, and `run_case` measuring every case through its kind."""

from __future__ import annotations

import pytest

from mibench.engines import MODES, OPTIONS
from mibench.harness import case_kinds as kinds
from mibench.harness.config.spec import HTTP_FIELDS
from mibench.harness.run.case import ModelCase, run_case
from mibench.harness.under_test.requests_case import RequestsCase


def test_every_engine_has_a_kind_and_the_kinds_split_the_case_keys():
    assert set(kinds.CASE_KINDS) == set(MODES)
    assert isinstance(kinds.kind_of("jax"), ModelCase)
    assert isinstance(kinds.kind_of("torch"), ModelCase)
    assert isinstance(kinds.kind_of("http"), RequestsCase)
    assert isinstance(kinds.kind_of("an-older-revisions-engine"), ModelCase)
    model, load = kinds.kind_of("jax"), kinds.kind_of("http")
    assert model.fields == set(OPTIONS) and load.fields == set(HTTP_FIELDS)
    assert not model.fields & load.fields
    assert "compile_s" in RequestsCase.__doc__ and "params" in RequestsCase.__doc__


class Recording:
    """A kind that records what it was asked to measure."""

    name, fields = "recording", frozenset()

    def __init__(self):
        self.measured = []

    def measure(self, case, pool, peak, tick, measuring):
        self.measured.append(case)
        return "a record"

    def after(self, case, rec, servers):
        pass


@pytest.mark.parametrize("engine", ["jax", "http"])
def test_run_case_measures_through_the_registry(monkeypatch, engine):
    assert engine in kinds.CASE_KINDS  # filled
    recording = Recording()
    case = type("Case", (), {"engine": engine})()
    with kinds.CASE_KINDS.entry(engine, recording):
        assert run_case(case, None, None, None) == "a record"
        other = "http" if engine == "jax" else "jax"
        assert not isinstance(kinds.kind_of(other), Recording)  # control: only that engine's
    assert recording.measured == [case]
    assert not isinstance(kinds.kind_of(engine), Recording)  # and afterwards as before


def test_the_wing_fills_every_hook_the_core_asks_of_an_http_case():
    """Each hook of `CaseKind` that http cases answer differently is overridden by the wing's
    kind (a missing override would silently treat a server as an in-process engine)."""
    from mibench.harness.case_kinds import CaseKind

    hooks = ("measure", "after", "open_servers", "problems", "host_problems", "client_memory",
             "plans", "runs", "flops_unknown", "tolerance", "server", "label_parts", "bound",
             "parity", "report_tables", "report_charts", "measured_nothing", "server_ab",
             "interleaved", "no_engine_parity", "timed_interval", "runs_idle", "runs_idle_why",
             "parity_checks", "sharded", "results_note", "items_every_run", "options_text",
             "jobs")
    assert set(hooks) == {n for n in vars(CaseKind) if not n.startswith("_")} - {"name",
                                                                                 "fields"}
    same = [h for h in hooks if getattr(RequestsCase, h) is getattr(CaseKind, h)
            or getattr(RequestsCase, h) == getattr(CaseKind, h)]
    assert same == []
    # control: the model case keeps the defaults of the hooks it does not need
    assert [h for h in hooks if getattr(ModelCase, h) is not getattr(CaseKind, h)] == [
        "measure", "after"]

"""Batch invariance of mibench's own engines as a stated property (harness/jobs/
invariance.py, docs/parity.md): every mode's item alone against the same item among others
in its own batching holds its stated bound (bitwise or 1e-5 in log), a changed neighbour
changes nothing, and each mode's leak control is caught; `mibench serve` gives a request
the same scores alone and among others in flight, and a server whose scores move with what
is in flight is caught by the same measurement."""

from __future__ import annotations

import pytest

from mibench.engines import MODES, leaking
from mibench.harness.jobs import invariance as inv

IDS = [f"{v.engine}-{v.mode}-{inv.options_label(v.options)}" for v in inv.VARIANTS]


@pytest.fixture(scope="module")
def engines():
    return inv.engines()


def test_every_mode_of_every_engine_states_its_property():
    covered = {(v.engine, v.mode) for v in inv.VARIANTS}
    assert covered == {(e, m) for e in ("jax", "torch") for m in MODES[e]}
    assert all((v.engine, v.mode, inv.options_label(v.options)) in inv.CLAIMS
               for v in inv.VARIANTS)
    assert set(inv.CLAIMS.values()) <= {"bitwise", "tolerance"}


def check(row: inv.Row) -> None:
    bound = 0.0 if row.claim == "bitwise" else inv.TOL
    assert row.alone_vs_among <= bound, row
    assert row.neighbour_same == 0.0, row  # nothing of a neighbour reaches the item
    assert row.neighbour_len <= inv.TOL, row
    assert row.leak > inv.TOL, row  # the control: the measurement can fail
    assert row.holds


@pytest.mark.slow
@pytest.mark.parametrize("v", inv.VARIANTS, ids=IDS)
def test_every_mode_holds_its_stated_property(engines, v):
    check(inv.measure(engines[v.engine], v, seed=1))  # the job measures seed 0


@pytest.mark.slow
def test_a_leak_is_off_again_after_its_block(engines):
    v = inv.VARIANTS[1]  # packed, dense
    with leaking(v.leak, engines["jax"]):
        pass
    check(inv.measure(engines["jax"], v))


@pytest.mark.slow
def test_serve_is_invariant_under_load_and_the_in_flight_fake_is_caught():
    from mibench.harness.under_test.jobs.invariance_serve import serve_rows

    (row,) = serve_rows(modes=("packed",))
    assert (row.alone_vs_among, row.neighbour_same, row.neighbour_len) == (0.0, 0.0, 0.0)
    assert row.leak > inv.TOL and row.holds

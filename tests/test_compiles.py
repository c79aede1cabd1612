"""`count_compiles` keeps no state between blocks: each registers its own JAX listener on
entry and removes it on exit, so blocks nest and follow each other."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax._src import monitoring  # no public way to list the registered listeners

from mibench.engines.modes.compiles import count_compiles


def _compile_one(scale: float) -> None:
    """One fresh backend compilation: a new function, so no cache can serve it."""
    jax.jit(lambda x: x * scale + 1)(np.arange(5))


def test_blocks_nest_and_follow_each_other():
    before = monitoring.get_event_duration_listeners()
    with count_compiles() as outer:
        _compile_one(2.0)
        with count_compiles() as inner:
            assert len(monitoring.get_event_duration_listeners()) == len(before) + 2
            _compile_one(3.0)
        _compile_one(4.0)
    assert (outer(), inner()) == (3, 1)
    with count_compiles() as again:  # a later block starts from zero
        _compile_one(5.0)
    assert again() == 1
    _compile_one(6.0)  # outside every block: no count moves
    assert (outer(), inner(), again()) == (3, 1, 1)
    assert monitoring.get_event_duration_listeners() == before


def test_listener_is_removed_when_the_block_raises():
    before = monitoring.get_event_duration_listeners()
    with pytest.raises(RuntimeError), count_compiles():
        assert len(monitoring.get_event_duration_listeners()) == len(before) + 1  # control
        raise RuntimeError("boom")
    assert monitoring.get_event_duration_listeners() == before

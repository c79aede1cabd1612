"""Compile counts of a case judged (pure): XLA compilations during the timed runs mean the
times include compiling, so they are not the steady state a mode promises (prefill+extend
pads every batch to a precompiled bucket for this). Any such compile fails the gate;
counts that were not taken (None: the engine or an older artifact did not count) are
"not counted", never 0."""

from __future__ import annotations

from ..records import Metrics

NOT_COUNTED = "not counted"


def timed_compile_fault(metrics: Metrics) -> str | None:
    """`N XLA compilation(s) during the timed runs ...` when there were any, else None."""
    n = metrics.timed_compiles
    if not n:
        return None
    return (f"{n} XLA compilation(s) during the timed runs (0 expected: its times include "
            f"compiling)")


def count(n: int | None) -> str:
    """A count as text: the number, or `not counted`."""
    return NOT_COUNTED if n is None else str(n)

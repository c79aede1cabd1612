"""Counts XLA backend compilations, so tests (and the harness) can prove that a repeated,
identical `score` call compiles nothing."""

from __future__ import annotations

import contextlib

_EVENT = "/jax/core/compile/backend_compile_duration"


@contextlib.contextmanager
def count_compiles():
    """`with count_compiles() as n: ...`; `n()` is the compilations inside the block so far,
    fixed at exit. Each block registers its own JAX monitoring listener on entry and removes
    it on exit, so blocks nest and follow each other without sharing any state."""
    import jax

    count = [0]

    def listener(name: str, *_args, **_kwargs) -> None:
        if name == _EVENT:
            count[0] += 1

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield lambda: count[0]
    finally:
        _unregister(listener)


def _unregister(listener) -> None:
    import jax

    remove = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if remove is None:  # older jax (pyproject's floor is 0.4.35) has only the private helper
        from jax._src import monitoring

        remove = monitoring._unregister_event_duration_listener_by_callback
    remove(listener)

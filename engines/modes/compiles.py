"""Counts XLA backend compilations, so tests (and the harness) can prove that a repeated,
identical `score` call compiles nothing."""

from __future__ import annotations

import contextlib

_EVENT = "/jax/core/compile/backend_compile_duration"
_count = 0
_registered = False


def _listener(name: str, *_args, **_kwargs) -> None:
    global _count
    if name == _EVENT:
        _count += 1


def compile_count() -> int:
    """Backend compilations since this module started listening (process-wide)."""
    global _registered
    if not _registered:
        import jax

        jax.monitoring.register_event_duration_secs_listener(_listener)
        _registered = True
    return _count


@contextlib.contextmanager
def count_compiles():
    """`with count_compiles() as n: ...`; afterwards `n()` is the compilations inside."""
    start = compile_count()
    end: list[int] = []
    yield lambda: (end[0] if end else compile_count()) - start
    end.append(compile_count())

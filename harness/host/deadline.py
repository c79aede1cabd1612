"""A case's deadline: SIGALRM in the main thread raises CaseTimeout once its time is up."""

from __future__ import annotations

import contextlib
import signal
import threading


class CaseTimeout(Exception):
    """A case ran past its `runs.timeout_s`."""


@contextlib.contextmanager
def deadline(seconds: float | None):
    """Raise CaseTimeout in the main thread once `seconds` have passed (SIGALRM). A call
    stuck inside native code is interrupted when it returns to Python."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expire(signum, frame):
        raise CaseTimeout(f"case exceeded runs.timeout_s={seconds:g}")

    old = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)

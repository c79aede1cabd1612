"""Lines for a user who waits: the heartbeat thread that says what runs after HEARTBEAT_S
of silence (`lines` progress, harness/run/progress.py), `CaseCounter` for commands whose
cases are one long call each (`mibench compile`: `[i/N] compiling CASE elapsed H:MM:SS ETA
H:MM:SS` as each starts), and `still` around one long step (an `ab` round's case: `round
2/5 base (1a2b3c4d) CASE: still running, 0:01:30`). Plain lines on stderr, flushed."""

from __future__ import annotations

import contextlib
import sys
import threading
import time

HEARTBEAT_S = 30.0  # the least time between two lines about the same running thing


def clock(seconds: float | None) -> str:
    """H:MM:SS ("?" when unknown)."""
    if seconds is None:
        return "?"
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class Heartbeat:
    """Calls `beat` every `every` seconds on a daemon thread until `stop`."""

    def __init__(self, beat, every: float):
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, args=(beat, every), daemon=True,
                                        name="mibench-heartbeat")
        self._thread.start()

    def _loop(self, beat, every: float) -> None:
        while not self._stop.wait(every):
            beat()

    def stop(self) -> None:
        """No beat after this returns (one under way is waited for, a second at most)."""
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(1.0)


class CaseCounter:
    """`[i/n] VERB CASE_ID elapsed H:MM:SS ETA H:MM:SS` on stderr as each case starts (the
    ETA: the mean case so far times the cases left, `?` before one finished), and with
    `heartbeat` a line after each HEARTBEAT_S of silence while one runs: for commands
    whose case is one long call (`mibench compile`)."""

    def __init__(self, n: int, verb: str, stream=None, timer=time.monotonic,
                 heartbeat: bool = True):
        self.n, self.verb, self._stream, self.clock = n, verb, stream, timer
        self.t0 = self._said = self._case_t0 = timer()
        self._case, self._finished = "", 0
        self._lock = threading.Lock()
        self._beat = Heartbeat(self.beat, min(5.0, HEARTBEAT_S)) if heartbeat else None

    def _print(self, line: str) -> None:
        with self._lock:
            print(line, file=self._stream or sys.stderr, flush=True)
            self._said = self.clock()

    def start(self, i: int, case_id: str) -> None:
        now = self.clock()
        self._finished = i - 1
        spent = now - self.t0
        left = spent / self._finished * (self.n - self._finished) if self._finished else None
        self._case, self._case_t0 = f"[{i}/{self.n}] {case_id}", now
        self._print(f"[{i}/{self.n}] {self.verb} {case_id} elapsed {clock(spent)} "
                    f"ETA {clock(left)}")

    def beat(self) -> None:
        now = self.clock()
        if self._case and now - self._said >= HEARTBEAT_S:
            self._print(f"{self._case}: {self.verb}, case {clock(now - self._case_t0)}, "
                        f"elapsed {clock(now - self.t0)}")

    def close(self) -> None:
        self._case = ""
        if self._beat is not None:
            self._beat.stop()



@contextlib.contextmanager
def still(say, what: str, timer=time.monotonic, every: float = HEARTBEAT_S):
    """`say("WHAT: still running, H:MM:SS")` every `every` seconds while the block runs."""
    t0 = timer()
    beat = Heartbeat(lambda: say(f"{what}: still running, {clock(timer() - t0)}"), every)
    try:
        yield
    finally:
        beat.stop()

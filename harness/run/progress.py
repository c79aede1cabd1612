"""Progress on stderr, in one of four styles (`mibench run --progress`):

- `bar`: one rich bar over every engine call of the run (case i of n, case id, run,
  elapsed, ETA), redrawn in place: for a terminal;
- `lines`: one plain line per finished case (`[i/n] CASE_ID STATUS N items/s elapsed
  H:MM:SS ETA H:MM:SS`) and one per parity group, flushed at once: for CI logs and pipes;
- `auto` (the default): `bar` when stderr is a terminal, else `lines`;
- `none`: nothing.
"""

from __future__ import annotations

import sys
import time

STYLES = ("auto", "bar", "lines", "none")


class NullProgress:
    """Reports nothing."""

    def start_case(self, i: int, n: int, case_id: str, calls: int) -> None: ...

    def tick(self, label: str) -> None: ...

    def end_case(self, record) -> None: ...

    def note(self, label: str) -> None: ...

    def close(self) -> None: ...


class RichProgress(NullProgress):
    """One bar over every engine call of the run (compile, warmup and timed runs)."""

    def __init__(self, total_calls: int):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("ETA"), TimeRemainingColumn(),
                                  console=Console(stderr=True), transient=False)
        self._task = self._progress.add_task("starting", total=total_calls)
        self._case = ""
        self._end = 0  # where the bar stands once the current case is over
        self._progress.start()

    def start_case(self, i: int, n: int, case_id: str, calls: int) -> None:
        """A case that failed early skipped its remaining calls: jump past them."""
        self._case = f"[{i}/{n}] {case_id}"
        self._progress.update(self._task, description=self._case, completed=self._end)
        self._end += calls

    def tick(self, label: str) -> None:
        self._progress.update(self._task, advance=1, description=f"{self._case} {label}")

    def note(self, label: str) -> None:
        self._progress.update(self._task, description=label)

    def close(self) -> None:
        self._progress.stop()


def clock(seconds: float | None) -> str:
    """H:MM:SS ("?" when unknown)."""
    if seconds is None:
        return "?"
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


class LineProgress(NullProgress):
    """One line per finished case on stderr. The ETA spreads the elapsed time over the
    engine calls done (a failed case counts all of its calls) and scales it to the calls
    left."""

    def __init__(self, total_calls: int, stream=None):
        self._stream = stream  # None: sys.stderr at print time (so capture sees it)
        self._total = total_calls
        self._done = 0
        self._t0 = time.monotonic()
        self._case = ("", 0)  # "[i/n] case_id", calls

    def _print(self, line: str) -> None:
        stream = self._stream or sys.stderr
        print(line, file=stream, flush=True)

    def start_case(self, i: int, n: int, case_id: str, calls: int) -> None:
        self._case = (f"[{i}/{n}] {case_id}", calls)

    def end_case(self, record) -> None:
        label, calls = self._case
        self._done += calls
        elapsed = time.monotonic() - self._t0
        left = max(self._total - self._done, 0)
        eta = elapsed / self._done * left if self._done else None
        t = record.metrics.throughput_items_per_s if record.metrics else None
        speed = f"{t.median:.4g} items/s" if t is not None else "- items/s"
        why = f" ({record.error.type})" if record.error is not None else ""
        self._print(f"{label} {record.status}{why} {speed} elapsed {clock(elapsed)} "
                    f"ETA {clock(eta)}")

    def note(self, label: str) -> None:
        self._print(f"{label} elapsed {clock(time.monotonic() - self._t0)}")


def style(value: str | bool | None) -> str:
    """A progress style from the CLI or the Python API (True: auto, False/None: none)."""
    from mibench.errors import MibenchError

    if value is True:
        return "auto"
    if value is False or value is None:
        return "none"
    if value not in STYLES:
        raise MibenchError(f"expected one of {', '.join(STYLES)}, got {value!r}",
                           field="--progress")
    return value


def make_progress(mode: str | bool, total_calls: int, stream=None) -> NullProgress:
    """The progress of a run of `total_calls` engine calls in style `mode`."""
    mode = style(mode)
    if mode == "auto":
        mode = "bar" if (stream or sys.stderr).isatty() else "lines"
    if mode == "bar":
        return RichProgress(total_calls)
    if mode == "lines":
        return LineProgress(total_calls, stream)
    return NullProgress()

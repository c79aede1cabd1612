"""Progress on stderr: case i of n, case id, run, elapsed, ETA. Quiet when not a terminal."""

from __future__ import annotations

import sys


class NullProgress:
    """Reports nothing (tests, pipes, CI logs)."""

    def start_case(self, i: int, n: int, case_id: str, calls: int) -> None: ...

    def tick(self, label: str) -> None: ...

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


def make_progress(enabled: bool, total_calls: int) -> NullProgress:
    if enabled and sys.stderr.isatty():
        return RichProgress(total_calls)
    return NullProgress()

"""Progress on stderr, in one of four styles (`mibench run --progress`):

- `bar`: for a terminal. Each finished case stays on screen as a line with its figure
  (`✓ [3/7] jax/packed/mask=segment/tp=1 ok 690 items/s 0:00:17`); below them one bar
  redrawn in place: the case and what it does now (before its first call: `loading,
  compiling`: a worker starts, loads the engine and compiles; then `warmup 1/1`, `run
  3/5`), the bar, the case's number, elapsed time and the ETA. The case id is cut in its
  middle to fit the terminal (80 columns and up); the bar keeps its width. Each step of a
  capacity search (`slo 2/s met`) stays on screen as a line too.
- `lines`: one plain line per finished case (`[i/n] CASE_ID STATUS N items/s elapsed
  H:MM:SS ETA H:MM:SS`) and one per parity group, flushed at once: for CI logs and pipes.
  A case that runs on says what it does at most once every HEARTBEAT_S, from a heartbeat
  thread even while one call runs for minutes (`[i/n] CASE_ID: run 2/5, case 0:01:30,
  elapsed H:MM:SS`: the phase is `loading, compiling`, `warmup k/w`, `run k/n`, or the
  parity check), and each step of a capacity search gets its line (`[i/n] CASE_ID: slo
  0.25/s met elapsed H:MM:SS`), so an hour-long run is not an hour of silence in a log;
- `auto` (the default): `bar` when stderr is a terminal, else `lines`;
- `none`: nothing.

An interrupted run's bar ends `interrupted`, with no ETA. The heartbeat thread, and the
same kind of lines for `compile` and `ab`: harness/run/heartbeat.py.

Both ETAs come from `Eta`, which weighs the calls still to come by their measured cost:
a case's first call (worker start, model load, compile) at the mean first call so far, every
other call at the current case's own measured call time (else the mean of all such calls),
never by counting calls.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time

from .heartbeat import HEARTBEAT_S, Heartbeat, clock

STYLES = ("auto", "bar", "lines", "none")
FIRST_CALL = "compile"  # the tick label of a worker's first call (harness/run/measure.py)
BAR_WIDTH = (12, 24)  # at 80 columns, from 120 columns
# case i/n (up to 7), elapsed (7), `ETA 0:00:00` (11) and the gaps between the 5 columns
FIXED_COLUMNS = 29
STEP = "slo "  # a capacity search's step (harness/under_test/slo.py): each one gets its line


class Eta:
    """Seconds left in a run of `total_calls` engine calls, from what the calls took so far
    (`clock` for tests). A case is told by `start_case`, each finished call by `tick` (its
    label), the end of a case by `end_case` (a case that failed early skips its calls)."""

    def __init__(self, total_calls: int, clock=time.monotonic):
        self.clock, self.total = clock, total_calls
        self.first: list[float] = []  # seconds of each first call (worker, model, compile)
        self.calls: list[float] = []  # seconds of every other call
        self.done = 0  # calls finished or skipped, before the current case
        self.case_calls, self.case_ticks, self.case_costs = 0, 0, []
        self.last = self.t0 = clock()
        self.cases_left = 0

    def start_case(self, i: int, n: int, calls: int) -> None:
        self.case_calls, self.case_ticks, self.case_costs = calls, 0, []
        self.cases_left = n - i  # after this one
        self.last = self.clock()

    def tick(self, label: str) -> None:
        now = self.clock()
        (self.first if label == FIRST_CALL else self.case_costs).append(now - self.last)
        self.case_ticks, self.last = self.case_ticks + 1, now

    def end_case(self) -> None:
        self.calls += self.case_costs
        self.done += self.case_calls
        self.case_calls = self.case_ticks = 0
        self.case_costs = []

    def elapsed(self) -> float:
        return self.clock() - self.t0

    def remaining(self) -> float | None:
        """None until both kinds of call have been measured once."""
        per_call = statistics.fmean(self.case_costs or self.calls + self.case_costs) \
            if self.calls or self.case_costs else None
        first = statistics.fmean(self.first) if self.first else None
        if per_call is None or first is None:
            return None
        now = self.clock() - self.last
        left = max(self.case_calls - self.case_ticks, 0)
        if not self.case_calls:  # between cases
            current = 0.0
        elif self.case_ticks:
            current = max(left * per_call - now, 0.0)
        else:
            current = max(first - now, 0.0) + max(left - 1, 0) * per_call
        future_calls = max(self.total - self.done - self.case_calls, 0)
        global_call = statistics.fmean(self.calls) if self.calls else per_call
        firsts = min(self.cases_left, future_calls)
        return current + firsts * first + (future_calls - firsts) * global_call


class NullProgress:
    """Reports nothing. `runs`: the case's (warmup, timed) calls, to name the call now
    running; `stopped`: the run was interrupted (no `finished`, no ETA)."""

    def start_case(self, i: int, n: int, case_id: str, calls: int,
                   runs: tuple[int, int] | None = None) -> None: ...

    def tick(self, label: str) -> None: ...

    def end_case(self, record) -> None: ...

    def note(self, label: str) -> None: ...

    def close(self, stopped: bool = False) -> None: ...


def phase_after(label: str, runs: tuple[int, int] | None) -> str:
    """The call a case runs after the call `label` (harness/run/measure.py's ticks)
    finished: `compile` -> `warmup 1/w` (or `run 1/n`), `warmup w/w` -> `run 1/n`, ...;
    a label of another kind (a server's load, a capacity step): `after LABEL`."""
    warmup, timed = runs or (0, 0)
    word, _, count = label.partition(" ")
    k, _, n = count.partition("/")
    if runs and label == FIRST_CALL:
        return f"warmup 1/{warmup}" if warmup else f"run 1/{timed}"
    if runs and word in ("warmup", "run") and k.isdigit() and n.isdigit():
        if int(k) < int(n):
            return f"{word} {int(k) + 1}/{n}"
        if word == "warmup":
            return f"run 1/{timed}"
        return "finishing the case"
    return f"after {label}"


def figure(record) -> str:
    """`STATUS N items/s`, with the error's type after a status that is not ok."""
    t = record.metrics.throughput_items_per_s if record.metrics else None
    speed = f"{t.median:.4g} items/s" if t is not None else "- items/s"
    why = f" ({record.error.type})" if record.error is not None else ""
    return f"{record.status}{why} {speed}"


def middle_cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut in the middle (`jax/prefill…s=1,2,4/tp=1`)."""
    if len(text) <= width:
        return text
    if width < 5:
        return text[:width]
    head = (width - 1) // 2
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


class RichProgress(NullProgress):
    """Finished cases as lines that stay, and one bar for what is running now."""

    def __init__(self, total_calls: int, timer=time.monotonic, console=None):
        from rich.console import Console
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn
        from rich.table import Column
        from rich.text import Text

        class Live(ProgressColumn):  # redrawn every refresh: time moves during a long call
            def __init__(self, text):
                super().__init__()
                self._source = text

            def render(self, task):
                return Text(self._source())

        self.console = console or Console(stderr=True, highlight=False)
        self.eta = Eta(total_calls, timer)
        bar = BAR_WIDTH[self.console.width >= 120]
        self.width = max(self.console.width - FIXED_COLUMNS - bar, 16)
        self._progress = Progress(
            TextColumn("{task.description}", table_column=Column(
                width=self.width, no_wrap=True, overflow="ellipsis")),
            BarColumn(bar_width=bar), TextColumn("{task.fields[cases]}", table_column=Column(
                width=7, no_wrap=True, justify="right")),
            Live(lambda: clock(self.eta.elapsed())),
            Live(lambda: "" if self._closed == "interrupted" else
                 "ETA " + clock(self.eta.remaining() if not self._closed else 0)),
            console=self.console, transient=False)
        self._closed = False
        self._task = self._progress.add_task(
            self._fit("starting: a worker loads the engine", ""), total=1.0, cases="0/?")
        self._case = ("", "", 0)  # "[i/n]", case id, n
        self._finished, self._started = 0, self.eta.clock()
        self._progress.start()

    def _fit(self, head: str, tail: str) -> str:
        """`head tail` in the description's width, `head` (the case id) cut first."""
        room = self.width - len(tail) - (1 if tail else 0)
        return (middle_cut(head, room) + (" " + tail if tail else ""))[:self.width]

    def _update(self, what: str) -> None:
        i, case_id, n = self._case
        left, spent = self.eta.remaining(), self.eta.elapsed()
        done = spent / (spent + left) if left is not None and spent + left > 0 else \
            self.eta.done / max(self.eta.total, 1)
        self._progress.update(self._task, description=self._fit(case_id, what),
                              completed=done, cases=i.strip("[]"))

    def start_case(self, i: int, n: int, case_id: str, calls: int,
                   runs: tuple[int, int] | None = None) -> None:
        self.eta.start_case(i, n, calls)
        self._case = (f"[{i}/{n}]", case_id, n)
        self._started = self.eta.clock()
        self._update("loading, compiling" if i == 1 else "compiling")

    def tick(self, label: str) -> None:
        self.eta.tick(label)
        if label.startswith(STEP):
            i, case_id, _ = self._case
            self._progress.console.print(f"  {i} {case_id}: {label}", markup=False,
                                         highlight=False, soft_wrap=True)
        self._update(label)

    def end_case(self, record) -> None:
        self.eta.end_case()
        self._finished += 1
        i, case_id, n = self._case
        mark = "✓" if record.status == "ok" else "-" if record.status == "skipped" else "✗"
        self._progress.console.print(f"{mark} {i} {case_id} {figure(record)} "
                                     f"{clock(self.eta.clock() - self._started)}",
                                     markup=False, highlight=False, soft_wrap=True)
        self._update("done")

    def note(self, label: str) -> None:
        self._progress.console.print(f"  {label}", markup=False, highlight=False)
        self._progress.update(self._task, description=self._fit(label, ""))

    def close(self, stopped: bool = False) -> None:
        self._closed = "interrupted" if stopped else "finished"  # interrupted: no ETA
        self._progress.update(self._task, description=self._fit(
            "interrupted" if stopped else "finished", ""), completed=None if stopped else 1.0)
        self._progress.stop()


class LineProgress(NullProgress):
    """One line per finished case on stderr, with `Eta`'s estimate."""

    def __init__(self, total_calls: int, stream=None, timer=time.monotonic,
                 heartbeat: bool = False):
        self._stream = stream  # None: sys.stderr at print time (so capture sees it)
        self.eta = Eta(total_calls, timer)
        self._case = ""  # "[i/n] case_id"
        self._said = self._case_t0 = timer()  # the last line; the case's start
        self._phase, self._runs = "starting: probing the devices, loading the engine", None
        self._lock = threading.Lock()
        self._beat = Heartbeat(self.beat, min(5.0, HEARTBEAT_S)) if heartbeat else None

    def _print(self, line: str) -> None:
        stream = self._stream or sys.stderr
        with self._lock:
            print(line, file=stream, flush=True)
            self._said = self.eta.clock()

    def beat(self) -> None:
        """After HEARTBEAT_S without a line: which case, what it runs now, for how long."""
        now = self.eta.clock()
        if now - self._said < HEARTBEAT_S:
            return
        case = f"{self._case}: " if self._case else ""
        took = f", case {clock(now - self._case_t0)}" if self._case else ""
        self._print(f"{case}{self._phase}{took}, elapsed {clock(self.eta.elapsed())}")

    def start_case(self, i: int, n: int, case_id: str, calls: int,
                   runs: tuple[int, int] | None = None) -> None:
        self.eta.start_case(i, n, calls)
        self._case, self._runs = f"[{i}/{n}] {case_id}", runs
        self._phase = "loading, compiling (the first call)"
        self._said = self._case_t0 = self.eta.clock()

    def tick(self, label: str) -> None:
        self.eta.tick(label)
        self._phase = phase_after(label, self._runs)
        if label.startswith(STEP) or self.eta.clock() - self._said >= HEARTBEAT_S:
            self._print(f"{self._case}: {label} elapsed {clock(self.eta.elapsed())}")

    def end_case(self, record) -> None:
        self.eta.end_case()
        left = 0.0 if self.eta.done >= self.eta.total else self.eta.remaining()
        self._print(f"{self._case} {figure(record)} elapsed {clock(self.eta.elapsed())} "
                    f"ETA {clock(left)}")
        self._phase = f"after {self._case}"
        self._case = ""

    def note(self, label: str) -> None:
        self._phase = label
        self._print(f"{label} elapsed {clock(self.eta.elapsed())}")

    def close(self, stopped: bool = False) -> None:
        if self._beat is not None:
            self._beat.stop()


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


def announce(mode: str | bool, line: str, stream=None) -> None:
    """What happens before the first case (`line`), on the terminal's bar only: the seconds
    spent probing devices and starting workers are not a silent screen; `lines` keeps its
    one line per case."""
    stream = stream or sys.stderr
    if style(mode) in ("auto", "bar") and (style(mode) == "bar" or stream.isatty()):
        print(line, file=stream, flush=True)


def make_progress(mode: str | bool, total_calls: int, stream=None) -> NullProgress:
    """The progress of a run of `total_calls` engine calls in style `mode`."""
    mode = style(mode)
    if mode == "auto":
        mode = "bar" if (stream or sys.stderr).isatty() else "lines"
    if mode == "bar":
        return RichProgress(total_calls)
    if mode == "lines":
        return LineProgress(total_calls, stream, heartbeat=True)
    return NullProgress()

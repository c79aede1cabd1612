"""How busy the machine was while a case was measured, from the CPU time of OTHER processes.

Between two snapshots (Linux /proc, in clock ticks, both taken outside the timed calls):

- the whole machine: /proc/stat's `cpu` line; busy = user + nice + system + irq + softirq
  + steal (steal: time a hypervisor gave to other guests), total = busy + idle + iowait;
- mibench's own process tree: the root process (`mibench run`'s, or `ab`'s; a worker's
  parent) and every process under it (engine workers, launched servers), each with
  utime + stime + cutime + cstime of /proc/PID/stat (cutime: its children that ended).

other = machine busy - own, and `other_share` = other / total: the share of the machine's
CPU time that processes outside mibench held. mibench's own threads never count, so a
commit that makes mibench use more threads, or wait more, still reads as slower, never as
busy (docs/verdicts.md says how the busy level was chosen).

Snapshots are taken before the first call, before the warmup runs and before the timed
runs, and after them (`Window`); the recorded load is the largest share over the windows
that end after the timed runs and start at one of those marks, among those of at least
`MIN_TICKS` clock ticks (a tick is 10 ms; fewer say little): a burst of other work during
the timed runs is not diluted by a quiet compile before them (seen: a case 2.2x slower in
an A/A pair whose one-second window read 5%), and a burst before them still shows.

`MIBENCH_FAKE_OTHER_LOAD=0.65` replaces the measurement with that share (tests and demos:
whether the machine is busy is something tests can fake); `source` then says `fake`.
"""

from __future__ import annotations

import dataclasses
import os
import time

from ..records.run import CaseLoad

FAKE_ENV = "MIBENCH_FAKE_OTHER_LOAD"
MIN_TICKS = 20  # 0.1 s on 2 CPUs: a share to within 5%, enough against a 25% level
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # user nice system irq softirq steal (guest is in user)
IDLE_FIELDS = (3, 4)  # idle iowait

# the process whose tree is mibench's own: this one, or (in an engine worker) the process
# that started it (bootstrap sets it), so both workers of an `ab` round are its own
root_pid: int | None = None


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """CPU clock ticks so far: the machine's busy and total, mibench's own tree's."""

    at: float  # time.monotonic()
    busy: int
    total: int
    own: int


PROC = "/proc"  # where the counters are read (tests point it at fixtures)


def machine_ticks(proc: str = PROC) -> tuple[int, int] | None:
    """(busy, total) clock ticks of every CPU since boot, None where /proc/stat is not."""
    try:
        with open(f"{proc}/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    if len(fields) < 8:
        return None
    busy = sum(fields[i] for i in BUSY_FIELDS)
    return busy, busy + sum(fields[i] for i in IDLE_FIELDS)


def _proc_stat(pid: str, proc: str = PROC) -> tuple[int, int] | None:
    """(parent pid, utime + stime + cutime + cstime) of a process, None if it is gone."""
    try:
        with open(f"{proc}/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # fields 4 (ppid) and 14-17 (utime stime cutime cstime) of proc(5), counted after ')'
    return int(rest[1]), sum(int(x) for x in rest[11:15])


def tree_ticks(root: int, proc: str = PROC) -> int | None:
    """Clock ticks of `root` and every process under it (None: /proc cannot say)."""
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return None
    stats = {int(p): s for p in pids if (s := _proc_stat(p, proc)) is not None}
    if root not in stats:
        return None
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += stats[pid][1]
        todo += children.get(pid, [])
    return total


def snapshot(root: int | None = None, proc: str = PROC) -> Snapshot | None:
    """The machine's and the tree's ticks now (None off Linux)."""
    machine = machine_ticks(proc)
    own = tree_ticks(root or root_pid or os.getpid(), proc)
    if machine is None or own is None:
        return None
    return Snapshot(at=time.monotonic(), busy=machine[0], total=machine[1], own=own)


def between(start: Snapshot, end: Snapshot) -> CaseLoad | None:
    """The load of the window from `start` to `end` (pure; None: no tick passed)."""
    total = end.total - start.total
    if total <= 0:
        return None
    hz = os.sysconf("SC_CLK_TCK")
    own = max(end.own - start.own, 0)
    other = max(end.busy - start.busy - own, 0)
    window = end.at - start.at
    return CaseLoad(window_s=window, cpus=max(1, round(total / hz / window)) if window > 0
                    else 1, other_share=min(other / total, 1.0), other_cpu_s=other / hz,
                    own_cpu_s=own / hz, source="/proc")


def faked(window_s: float) -> CaseLoad | None:
    """The load `MIBENCH_FAKE_OTHER_LOAD` says (None: not set); a bad value is ignored."""
    text = os.environ.get(FAKE_ENV)
    if text is None:
        return None
    try:
        share = min(max(float(text), 0.0), 1.0)
    except ValueError:
        return None
    cpus = os.cpu_count() or 1
    return CaseLoad(window_s=window_s, cpus=cpus, other_share=share,
                    other_cpu_s=share * window_s * cpus, own_cpu_s=None,
                    source=f"fake: {FAKE_ENV}={text}")


class Window:
    """Snapshots at the marks of one case (`mark()` before its first call, its warmup and
    its timed runs; `end()` after them); `load()` is the largest share over the windows
    from a mark to the end of at least MIN_TICKS ticks (the widest where none has)."""

    def __init__(self, probe=snapshot):
        self.probe = probe
        self.marks: list[Snapshot] = []
        self.last: Snapshot | None = None
        self.started = time.monotonic()

    def mark(self) -> None:
        snap = self.probe()
        if snap is not None:
            self.marks.append(snap)

    def end(self) -> None:
        self.last = self.probe()

    def load(self) -> CaseLoad | None:
        fake = faked(time.monotonic() - self.started)
        if fake is not None or self.last is None or not self.marks:
            return fake
        pairs = [(m, x) for m in self.marks if (x := between(m, self.last)) is not None]
        if not pairs:
            return None
        long = [x for m, x in pairs if self.last.total - m.total >= MIN_TICKS]
        return max(long or [pairs[0][1]], key=lambda x: x.other_share)

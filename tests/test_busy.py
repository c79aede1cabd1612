"""How busy the machine was, and what the verdicts between runs make of it: the probe
(harness/host/busy.py) counts only OTHER processes' CPU time, so a commit that makes
mibench use more threads or wait more reads as slower, never as busy; `compare` calls a
timing change with a busy side inconclusive and names the side and the share; a run
records the load of each case (faked in the suite: MIBENCH_FAKE_OTHER_LOAD)."""

from __future__ import annotations

import functools
import hashlib
import os
import resource
import subprocess
import sys
import threading
import time

import pytest

from mibench.harness.config import load_config
from mibench.harness.host import busy as host_busy
from mibench.harness.judge.busy import BUSY_LEVEL
from mibench.harness.judge.compare import compare
from mibench.harness.records import CaseLoad
from mibench.harness.run.plan import plan_of
from mibench.harness.run.runner import run
from mibench.harness.testing import FakeEngine, fixed_peak, write_config

CONFIG = """
name: busy
model: {path: "embedded:tiny"}
workload: {query_tokens: 8, num_items: 3, item_tokens: 2, label_token_ids: [5],
           delimiter: 151643}
runs: {warmup: 1, timed: 5, timeout_s: 600}
cases:
  - {engine: jax, mode: packed}
"""
HZ = os.sysconf("SC_CLK_TCK")


def snap(at: float, busy: int, total: int, own: int) -> host_busy.Snapshot:
    return host_busy.Snapshot(at=at, busy=busy, total=total, own=own)


# --- the probe ---------------------------------------------------------------------------


def test_mibench_s_own_cpu_time_is_never_load():
    """Two windows of one machine: in the second mibench itself used 80 more ticks (more
    threads), and the machine was busier by exactly those: the other processes' share is
    the same."""
    a = host_busy.between(snap(0, 0, 0, 0), snap(1, 100, 200, 80))
    b = host_busy.between(snap(0, 0, 0, 0), snap(1, 180, 200, 160))
    assert a.other_share == b.other_share == pytest.approx(0.1)
    assert b.own_cpu_s == pytest.approx(160 / HZ) and a.cpus == round(200 / HZ)
    # and other processes' ticks are theirs: 100 busy, 20 own -> 80 of 200 = 40%
    assert host_busy.between(snap(0, 0, 0, 0), snap(1, 100, 200, 20)).other_share == 0.4


def window_of(monkeypatch, snaps: list) -> host_busy.Window:
    """A case's window over fake snapshots: first call, warmup and timed marks, then end."""
    feed = iter(snaps)
    monkeypatch.delenv(host_busy.FAKE_ENV, raising=False)
    w = host_busy.Window(probe=lambda: next(feed))
    w.mark(), w.mark(), w.mark()
    w.end()
    return w


def test_a_burst_during_the_timed_runs_is_not_diluted_by_a_quiet_compile(monkeypatch):
    """Windows from each mark to the end; the largest share among those of at least
    MIN_TICKS ticks: here the timed runs' (80 ticks, 10 of them other processes')."""
    got = window_of(monkeypatch, [snap(0.0, 0, 0, 0), snap(0.8, 10, 320, 5),
                                  snap(1.5, 20, 600, 10), snap(1.7, 30, 680, 10)]).load()
    assert got.window_s == pytest.approx(0.2) and got.other_share == pytest.approx(10 / 80)
    # the timed runs too short to say anything (10 ticks): the warmup's window speaks
    got = window_of(monkeypatch, [snap(0.0, 0, 0, 0), snap(0.8, 10, 320, 5),
                                  snap(1.5, 20, 600, 10), snap(1.55, 30, 610, 10)]).load()
    assert got.window_s == pytest.approx(0.75) and got.other_share == pytest.approx(15 / 290)
    # and a burst before the timed runs still shows
    got = window_of(monkeypatch, [snap(0.0, 0, 0, 0), snap(0.8, 300, 320, 5),
                                  snap(1.5, 310, 600, 10), snap(1.7, 320, 680, 20)]).load()
    assert got.other_share == pytest.approx(300 / 680) and got.window_s == pytest.approx(1.7)


def test_the_fake_replaces_the_measurement(monkeypatch):
    w = window_of(monkeypatch, [snap(0.0, 0, 0, 0), snap(0.1, 0, 40, 0),
                                snap(0.2, 0, 80, 0), snap(0.3, 0, 120, 0)])
    assert w.load().other_share == 0
    monkeypatch.setenv(host_busy.FAKE_ENV, "0.65")
    assert w.load().other_share == 0.65 and w.load().source.startswith("fake")


def burn_cpu_seconds(seconds: float) -> None:
    """Use `seconds` of this thread's CPU time (hashing releases the GIL)."""
    block, end = b"x" * (1 << 16), time.thread_time() + seconds
    while time.thread_time() < end:
        hashlib.sha256(block).digest()


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc")
def test_the_tree_counts_threads_and_children_and_not_other_processes():
    """Real /proc: the own tree's ticks grow by what this process's threads and a child
    burn (CPU time: the same on a loaded machine, it only takes longer), and not by what
    a process outside the tree burns."""
    root = os.getpid()
    outside = subprocess.Popen([sys.executable, "-c", "import os\nif os.fork() == 0:\n"
                                " end = __import__('time').process_time() + 0.6\n"
                                " while __import__('time').process_time() < end: pass\n"],
                               start_new_session=True)  # its child is reparented: outside
    before = host_busy.tree_ticks(root)
    threads = [threading.Thread(target=burn_cpu_seconds, args=(0.3,)) for _ in range(2)]
    for t in threads:
        t.start()
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time()"
                              " + 0.3\nwhile time.process_time() < end: pass\n"])
    child.wait()
    for t in threads:
        t.join()
    outside.wait()
    grew = (host_busy.tree_ticks(root) - before) / HZ
    assert grew >= 0.8  # 2 x 0.3 s of threads + 0.3 s of the child (reaped: cutime)
    assert grew < 1.35  # + the child's start-up, never the outsider's 0.6 s


# --- a slower mibench is slower, not busy ------------------------------------------------


def quiet_machine(monkeypatch):
    """The machine as /proc would show it if nothing but mibench ran: busy = this
    process's CPU time (getrusage: every thread, another count than /proc's tree walk),
    total = wall time x 2 CPUs. Other load can then come only from miscounting our own."""
    def ticks(proc=host_busy.PROC):
        r = resource.getrusage(resource.RUSAGE_SELF)
        return int((r.ru_utime + r.ru_stime) * HZ), int(time.monotonic() * HZ * 2)

    monkeypatch.delenv(host_busy.FAKE_ENV, raising=False)
    monkeypatch.setattr(host_busy, "machine_ticks", ticks)


def threads_burn(engine):  # a commit that makes each call use two more busy threads
    steady(engine)
    ts = [threading.Thread(target=burn_cpu_seconds, args=(0.05,)) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def waits(engine):  # a commit that makes each call wait (a lock, a sleep, I/O)
    time.sleep(0.07)


def steady(engine):  # every call takes at least 20 ms: windows of many clock ticks
    time.sleep(0.02)


def measured(tmp_path, on_mode=None):
    config = load_config(write_config(tmp_path, CONFIG))
    hooks = on_mode or {"packed": steady}
    factory = functools.partial(FakeEngine, on_mode=hooks)
    return run(plan_of(config, out=tmp_path / "out", progress=False, peak=fixed_peak(),
                       engine_factory=factory, workers=False))


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc")
@pytest.mark.parametrize("slower", [threads_burn, waits], ids=["more-threads", "waits-more"])
def test_a_slower_mibench_is_a_regression_never_a_busy_machine(tmp_path, monkeypatch,
                                                               slower):
    quiet_machine(monkeypatch)
    base = measured(tmp_path)
    new = measured(tmp_path, {"packed": slower})
    assert new.cases[0].load.source == "/proc"
    for rec in (base, new):
        assert rec.cases[0].load.other_share < BUSY_LEVEL, rec.cases[0].load
        assert rec.cases[0].load.other_cpu_s < 0.15, rec.cases[0].load  # a few ticks
    if slower is threads_burn:  # 2 x 50 ms of CPU a call, counted as mibench's own
        assert new.cases[0].load.own_cpu_s > base.cases[0].load.own_cpu_s + 0.3
    (case,) = compare(base, new).cases
    assert case.verdict == "regression" and case.latency_change > 1.0, case.reason


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc")
def test_control_without_subtracting_our_own_time_the_slower_mibench_reads_busy(
        tmp_path, monkeypatch):
    """The control: a probe that did not count mibench's own threads as its own would
    call the slower commit's extra threads 'other load' (and, past the busy level, excuse
    it)."""
    quiet_machine(monkeypatch)
    monkeypatch.setattr(host_busy, "tree_ticks", lambda root, proc=host_busy.PROC: 0)
    base = measured(tmp_path)
    new = measured(tmp_path, {"packed": threads_burn})
    # CPU seconds, not shares: the same on a loaded machine, where the calls only last
    # longer (at least the 5 timed calls' 2 x 50 ms, misread as other load)
    assert new.cases[0].status == base.cases[0].status == "ok", new.cases[0].error
    assert new.cases[0].load.other_cpu_s > base.cases[0].load.other_cpu_s + 0.3


# --- compare on a busy machine -----------------------------------------------------------


def loaded(rec, share: float):
    out = rec.model_copy(deep=True)
    for c in out.cases:
        c.load = CaseLoad(window_s=2.0, cpus=2, other_share=share, other_cpu_s=4 * share,
                          own_cpu_s=1.0, source="/proc")
    return out


TIMES = [0.0100, 0.0104, 0.0098, 0.0102, 0.0101]  # fixed: no verdict below hangs on a clock


def slower_by(rec, factor: float):
    from mibench.harness.records.summaries import summarize
    from mibench.harness.stats.describe import per_unit_ms, rates

    out = rec.model_copy(deep=True)
    for c in out.cases:
        c.timed_s = [t * factor for t in TIMES]
        n = c.workload.num_items
        c.metrics.total_s = summarize(c.timed_s)
        c.metrics.throughput_items_per_s = summarize(rates(c.timed_s, n))
        c.metrics.latency_per_item_ms = summarize(per_unit_ms(c.timed_s, n))
    return out


@pytest.fixture(scope="module")
def quiet_pair(tmp_path_factory):
    base = slower_by(measured(tmp_path_factory.mktemp("busy")), 1.0)
    return loaded(base, 0.02), slower_by(loaded(base, 0.02), 3.0)


def test_a_busy_new_side_makes_a_3x_slowdown_inconclusive_naming_side_and_share(quiet_pair):
    """Other processes holding 65% of the CPU can stretch the new side's runs by up to
    1.25 / (1 - 0.65) = 3.6x: a 3x slowdown is no evidence of the code."""
    from mibench.harness.report.fmt import verdict_line

    base, new = quiet_pair
    assert compare(base, new).cases[0].verdict == "regression"  # quiet: caught
    comp = compare(base, loaded(new, 0.65))
    (case,) = comp.cases
    assert case.verdict == "inconclusive" and not comp.regression and comp.exit_code == 0
    assert case.reason.startswith("new side: other processes held 65% of the CPU; "
                                  "`mibench ab` decides it")
    line = verdict_line(comp)
    assert "1 inconclusive on a busy machine" in line and "new side: other " \
        "processes held 65% of the CPU; `mibench ab` decides it" in line
    assert line.startswith("Undecided against ")  # never "No regression" while undecided
    assert comp.busy == comp.cases


def test_busy_excuses_only_what_load_can_explain(quiet_pair):
    """A busy base side cannot explain the new side being slower, and no load of 65% can
    explain a 16x slowdown: both are regressions on a busy machine. A 16x speedup against a
    base busy at 65% is beyond what its load explains (3.6x), at 99% it is not (25x); a
    busy new side never explains a speedup."""
    base, new = quiet_pair
    comp = compare(loaded(base, 0.65), new)  # 3x, the base side busy
    assert comp.cases[0].verdict == "regression" and comp.exit_code == 1
    assert "slower than the new side's load can explain" in comp.cases[0].reason
    sixteen = slower_by(loaded(base, 0.65), 16.0)
    comp = compare(base, sixteen)
    assert comp.cases[0].verdict == "regression", comp.cases[0].reason
    assert "at most 3.57x" in comp.cases[0].reason
    fast = slower_by(loaded(base, 0.02), 1 / 16)
    # faster beyond what the base's load explains: an improvement, and at 16x with no parity
    # behind it a suspicious one (harness/judge/suspicious.py)
    assert compare(loaded(base, 0.65), fast).cases[0].verdict == "suspicious improvement"
    assert compare(loaded(base, 0.99), fast).cases[0].verdict == "inconclusive"  # 25x
    assert compare(base, loaded(fast, 0.65)).cases[0].verdict == "suspicious improvement"


def test_a_busy_side_never_hides_a_failed_case(quiet_pair):
    base, new = quiet_pair
    new = loaded(new, 0.9)
    new.cases[0].status = "failed"
    assert compare(base, new).cases[0].verdict == "failed"  # not timing: still a regression


def test_a_case_cut_short_by_its_deadline_records_the_load(monkeypatch):
    """The deadline fires during the warmup: the window still ends, and the case's load
    (here 3 of 4 ticks other processes') is recorded for compare to weigh its timeout."""
    from mibench.harness.host.deadline import CaseTimeout
    from mibench.harness.records import RunsRecord
    from mibench.harness.run.measure import Timings, measure

    monkeypatch.delenv(host_busy.FAKE_ENV, raising=False)
    ticks = iter(range(100))

    def probe():
        k = next(ticks)
        return snap(0.1 * k, 30 * k, 40 * k, 0)

    timings, calls = Timings(), []
    with pytest.raises(CaseTimeout):
        measure(lambda: calls.append(time.sleep(0.3 if calls else 0)),
                RunsRecord(warmup=5, timed=3, timeout_s=0.5), timings,
                window=host_busy.Window(probe=probe))
    assert timings.compile_s is not None and len(timings.timed_s) == 0
    assert timings.load is not None and timings.load.other_share == pytest.approx(0.75)


# --- the /proc reader itself, on fixtures (the suite fakes the load everywhere else) ----


def proc_tree(root, cpu: dict, procs: dict) -> str:
    """A fake /proc: `cpu` the `cpu` line's fields by name, `procs` pid -> (name, ppid,
    utime, stime, cutime, cstime)."""
    order = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
             "guest_nice")
    root.mkdir(parents=True, exist_ok=True)
    (root / "stat").write_text("cpu  " + " ".join(str(cpu.get(k, 0)) for k in order) + "\n"
                               "cpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345\n")
    for pid, (name, ppid, ut, st, cut, cst) in procs.items():
        (root / str(pid)).mkdir(exist_ok=True)
        # the comm field may hold spaces and parentheses: the reader splits at the last ')'
        rest = ["S", ppid, 1, 1, 0, -1, 4194304, 0, 0, 0, 0, ut, st, cut, cst, 20, 0, 1, 0]
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) " + " ".join(map(str, rest)))
    (root / "self").mkdir(exist_ok=True)  # not a pid: skipped
    return str(root)


def test_the_proc_reader_counts_steal_and_subtracts_mibench_s_tree(tmp_path):
    """Two /proc states 1 s apart on 2 CPUs (HZ ticks each): mibench (pid 100) and its
    worker (101, whose name has a space and a parenthesis) used 50 ticks; the machine was
    busy 150 more, 40 of them steal (a hypervisor giving this VM's time to its neighbours),
    and an unrelated process (300) used 60: other = 150 - 50 = 100 of 2 * HZ."""
    before = proc_tree(tmp_path / "a", {"user": 1000, "system": 500, "idle": 5000,
                                        "steal": 100},
                       {100: ("mibench", 1, 10, 5, 0, 0),
                        101: ("python (w) x", 100, 20, 5, 0, 0),
                        300: ("other", 1, 7, 0, 0, 0)})
    user = 1000 + 100 - 40
    after = proc_tree(tmp_path / "b", {"user": user, "system": 500 + 50, "idle":
                                       5000 + 2 * HZ - 150, "steal": 100 + 40},
                      {100: ("mibench", 1, 30, 5, 0, 0),  # +20
                       101: ("python (w) x", 100, 45, 10, 0, 0),  # +30
                       300: ("other", 1, 67, 0, 0, 0)})
    a = host_busy.snapshot(root=100, proc=before)
    b = host_busy.snapshot(root=100, proc=after)
    assert a.own == 40 and b.own == 90  # the tree: 100 and its child 101, not 300
    assert b.total - a.total == 2 * HZ and b.busy - a.busy == 150
    got = host_busy.between(a, b)
    assert got.other_share == pytest.approx(100 / (2 * HZ))
    assert got.own_cpu_s == pytest.approx(50 / HZ) and got.source == "/proc"
    # the control: without steal among the busy fields, the neighbours' 40 ticks vanish
    no_steal = tuple(i for i in host_busy.BUSY_FIELDS if i != 7)
    fields_a = [int(x) for x in (tmp_path / "a" / "stat").read_text().split()[1:9]]
    fields_b = [int(x) for x in (tmp_path / "b" / "stat").read_text().split()[1:9]]
    assert sum(fields_b[i] - fields_a[i] for i in no_steal) - 50 == 60  # 100 - 40


def test_the_proc_reader_says_nothing_when_proc_cannot(tmp_path):
    assert host_busy.machine_ticks(str(tmp_path / "nothing")) is None
    bare = proc_tree(tmp_path / "p", {"user": 1, "idle": 1}, {})
    assert host_busy.tree_ticks(100, bare) is None  # the root is gone
    assert host_busy.snapshot(root=100, proc=bare) is None

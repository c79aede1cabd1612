"""`mibench job verdicts` (harness/jobs/verdicts.py), in the parts a test can afford: its
busy loops are other processes (outside mibench's tree, so the probe counts them as other
load) and are stopped; its tables come from its result; a bad `--part` is one line. The
job itself runs for about 1.5 hours (`nox -s verdicts`)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from mibench.harness.cli import app
from mibench.harness.host import busy
from mibench.harness.jobs import verdicts as job
from mibench.harness.jobs.verdicts_report import write


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        return None


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux /proc")
def test_busy_loops_are_other_processes_and_stop(monkeypatch):
    started = []
    real_kill = os.kill

    def kill(pid, sig):  # what the loops' stop kills: the pids it started
        started.append(pid)
        real_kill(pid, sig)

    monkeypatch.setattr(job.os, "kill", kill)
    with job.busy_loops(2, duty=0.5):
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()
                and "duty = 0.5" in _cmdline(int(p))]
        assert len(pids) == 2
        assert all(_parent(p) != os.getpid() for p in pids)  # re-parented: not ours
        before = busy.tree_ticks(os.getpid())
    assert sorted(started) == sorted(pids)
    assert before is not None


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_tables_come_from_the_result(tmp_path):
    pair = {"pair": "1-2", "sides": "none/loops", "base_load": 0.02, "new_load": 0.6,
            "compare": {"exit": 0, "counts": {"inconclusive": 7}, "busy": "new side: ...",
                        "verdict": "No regression ..."},
            "history": {"exit": 0, "busy_points": 7, "steps": {"inconclusive": 2}}}
    slow = [{"factor": 2.0, "pair": 1, "exit": 1, "verdict": "regression",
             "latency_change": 1.02, "base_load": 0.03, "new_load": 0.04},
            {"factor": 2.0, "pair": 2, "exit": 0, "verdict": "inconclusive",
             "latency_change": 0.9, "base_load": 0.03, "new_load": 0.7}]
    result = {"cpu": "test cpu", "cores": 2, "seconds": {"aa": 1.0, "slow": 2.0},
              "aa": {"pairs": [pair], "history": {"exit": 0, "busy_points": 7,
                                                  "steps": {}}}, "slow": slow}
    write(result, tmp_path / "v.md")
    text = (tmp_path / "v.md").read_text()
    assert "| 1-2 | none/loops | 2% | 60% | 0 | 7 inconclusive | yes | 0 | 7 | 2 inconclusive |" \
        in text
    assert "2.0x: caught (exit 1) in 1 of 1 quiet pairs; 1 pair(s) with a busy side, all " \
           "exit [0]" in text


def test_a_bad_part_is_one_line(tmp_path):
    out = CliRunner().invoke(app, ["job", "verdicts", "--out", str(tmp_path), "--part",
                                   "nope"])
    assert out.exit_code == 2 and "--part: unknown part 'nope'" in out.output

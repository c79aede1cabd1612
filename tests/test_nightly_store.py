"""The nightly's history as a store nothing can lose (issue 41; harness/nightly/store.py):
an `accept` during a night survives it, a second night on the folder is refused naming the
holder, a SIGKILLed holder leaves no stale lock, a copied run counts once, a failed index
write is exit 4 with a summary that says so, entries outside the folder are refused, a
damaged run is left out with a line, a nightly/1 folder is migrated with nothing lost, and
`mibench regressions` lists the life cycle."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from nightly_fakes import EXTEND, nights, sha
from typer.testing import CliRunner

from mibench.errors import EnvironmentFailed, MibenchError
from mibench.harness.cli import app
from mibench.harness.nightly import store
from mibench.harness.nightly.index import Folder, accept
from mibench.harness.records.nightly import read_index


@pytest.fixture
def world(tmp_path):
    return nights(tmp_path)


def index(history):
    return read_index(history / "index.json")


def test_an_accept_made_during_a_night_survives_the_night(world):
    steps, history, night = world
    for at in (0, 2, 5):
        night(at)
    steps.during_run = lambda: accept(Folder(history), [EXTEND], "ana", "slower on purpose")
    result = night(8)
    (known,) = index(history).known
    assert known.status == "accepted" and known.accepted.by == "ana"
    assert index(history).baseline.reason == "accepted by ana: slower on purpose"
    assert [e.status for e in known.events] == ["confirmed", "accepted"]
    assert result.exit_code == 1  # the night judged it before the acceptance: still known


def test_control_saving_the_index_read_at_the_start_loses_the_accept(world):
    """What the night did before: it wrote the index it had read at its start."""
    steps, history, night = world
    for at in (0, 2, 5):
        night(at)
    started = index(history)
    accept(Folder(history), [EXTEND], "ana", "slower on purpose")
    store.save(history, lambda fresh: (started, []), "nightly-fake", "engines")
    assert index(history).known[0].status == "confirmed"  # the acceptance is gone


HOLD = """
import sys, time
from pathlib import Path
from mibench.harness.nightly.store import night_lock
with night_lock(Path(sys.argv[1]), command="mibench nightly (held by the test)"):
    print("held", flush=True)
    time.sleep(600)
"""


def hold(history):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(history)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_night_is_refused_naming_the_holder_and_a_killed_holder_leaves_no_lock(
        world):
    steps, history, night = world
    night(0)
    proc = hold(history)
    try:
        with pytest.raises(store.FolderHeld) as caught:
            night(2)
        assert caught.value.exit_code == store.HELD_EXIT == 6
        assert f"pid {proc.pid} on " in str(caught.value)
        assert "mibench nightly (held by the test)" in str(caught.value)
        out = CliRunner().invoke(app, ["nightly", str(steps.config_path), "--history",
                                       str(history)])
        assert out.exit_code == 6 and "another night holds this history folder" in out.output
    finally:
        proc.send_signal(signal.SIGKILL)  # no clean exit: the kernel lets go of the lock
        proc.wait()
    assert night(2).exit_code == 0 and index(history).baseline.commit == sha(2)


def test_a_copied_run_counts_once_and_is_said(world):
    steps, history, night = world
    night(0)
    first = sorted((history / "runs").glob("*.json"))[0]
    shutil.copy(first, history / "runs" / "copy-of-a-seed.json")
    result = night(2)
    assert any("copy-of-a-seed.json is a copy of run" in n for n in result.summary.notes)
    assert result.exit_code == 0 and result.summary.promoted


def test_a_damaged_run_is_left_out_with_a_line_and_the_night_goes_on(world):
    steps, history, night = world
    night(0)
    (history / "runs" / "broken.json").write_text('{"schema": "mibench.run/3", "run_id": 1')
    result = night(2)
    assert any("broken.json is damaged" in n for n in result.summary.notes)
    assert result.exit_code == 0


def test_a_failed_index_write_is_exit_4_and_the_summary_claims_nothing(world, monkeypatch):
    steps, history, night = world
    night(0)
    before = (history / "index.json").read_bytes()
    real = store.write_atomic

    def full(path, data):
        if path.name == "index.json":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, data)

    monkeypatch.setattr(store, "write_atomic", full)
    with pytest.raises(EnvironmentFailed) as caught:
        night(2)
    assert caught.value.exit_code == 4 and str(history / "index.json") in str(caught.value)
    assert "ENOSPC" in str(caught.value)
    assert (history / "index.json").read_bytes() == before  # as it was
    (where,) = [p for p in (history / "nights").iterdir() if p.name.endswith(sha(2)[:12])]
    summary = json.loads((where / "summary.json").read_text())
    assert summary["promoted"] is False
    assert "The index was not saved" in (where / "summary.md").read_text()
    assert "this commit is the new baseline" not in (where / "summary.md").read_text()


@pytest.mark.parametrize("where,value", [("artifact", "../../outside.json"),
                                         ("artifact", "/etc/passwd"),
                                         ("run_id", "../x")])
def test_an_index_entry_outside_the_folder_is_refused(world, where, value):
    steps, history, night = world
    night(0)
    data = json.loads((history / "index.json").read_text())
    data["baseline"][where] = value
    (history / "index.json").write_text(json.dumps(data))
    with pytest.raises(MibenchError, match="points outside the history folder"):
        night(2)


NIGHTLY_1 = {
    "schema": "mibench.nightly/1", "config": "nightly-fake", "target": "engines",
    "baseline": None, "nights": [],
    "known": [
        {"case_id": EXTEND, "measurement": "m1", "culprit": sha(4), "subject": "commit 4",
         "good": sha(2), "bad": sha(5), "level_run": "nightly-fake-005", "change": 1.0,
         "low": 0.9, "high": 1.1, "confirmed_at": "2026-05-01T00:00:00Z",
         "bisect": "bisect: 2 A/B steps over 3 commits", "status": "accepted",
         "accepted": {"by": "ana", "why": "exact softmax", "at": "2026-05-02T00:00:00Z"},
         "fixed_at": None},
        {"case_id": "jax/single/tp=1", "measurement": "m2", "culprit": None, "subject": None,
         "good": sha(2), "bad": sha(6), "level_run": "nightly-fake-006", "change": 0.5,
         "low": 0.3, "high": 0.7, "confirmed_at": "2026-05-03T00:00:00Z", "bisect": "undecided",
         "status": "open", "accepted": None, "fixed_at": None}],
    "disproved": [
        {"case_id": "jax/packed/mask=segment/tp=1", "measurement": "m3", "commit": sha(3),
         "evidence_run": "nightly-fake-003", "base": sha(2), "change": 0.01, "low": -0.02,
         "high": 0.03, "verdict": "unchanged", "at": "2026-05-01T12:00:00Z"}]}


def test_a_nightly_1_folder_is_migrated_with_nothing_lost(world):
    steps, history, night = world
    night(0)
    data = json.loads((history / "index.json").read_text())
    old = {**NIGHTLY_1, "baseline": data["baseline"], "nights": [
        {k: v for k, v in n.items() if k != "undecided"} for n in data["nights"]]}
    (history / "index.json").write_text(json.dumps(old))
    idx = index(history)  # read as nightly/2
    by_case = {r.case_id: r for r in idx.regressions}
    accepted = by_case[EXTEND]
    assert accepted.status == "accepted" and accepted.accepted.why == "exact softmax"
    assert accepted.culprit == sha(4) and accepted.change == 1.0
    assert by_case["jax/single/tp=1"].status == "confirmed" and by_case["jax/single/tp=1"].is_open
    gone = by_case["jax/packed/mask=segment/tp=1"]
    assert gone.status == "disproved" and gone.verdict == "unchanged" and gone.bad == sha(3)
    night(1)
    saved = json.loads((history / "index.json").read_text())
    assert saved["schema"] == "mibench.nightly/2" and "known" not in saved
    kept = json.loads((history / "index.nightly-1.json").read_text())
    assert kept == old  # the old file, byte for byte in meaning
    statuses = {r["case_id"]: r["status"] for r in saved["regressions"]}
    assert statuses[EXTEND] == "accepted" and statuses["jax/single/tp=1"] == "confirmed"
    assert statuses["jax/packed/mask=segment/tp=1"] == "disproved"


def test_regressions_lists_the_life_cycle_as_text_and_json(world):
    steps, history, night = world
    for at in (0, 2, 5):
        night(at)
    accept(Folder(history), [EXTEND], "ana", "slower on purpose")
    run = CliRunner().invoke
    out = run(app, ["regressions", str(history)])
    assert out.exit_code == 0, out.output
    assert out.stdout.startswith(f"accepted   regression {EXTEND}: +")
    assert f"culprit {sha(4)[:12]} 'commit 4'" in out.stdout
    assert "accepted by ana on " in out.stdout and "reproduce: mibench ab" in out.stdout
    assert "life: " in out.stdout and "confirmed at " in out.stdout
    data = json.loads(run(app, ["regressions", str(history), "--format", "json"]).stdout)
    assert data["schema"] == "mibench.regressions/1" and data["config"] == "nightly-fake"
    (r,) = data["regressions"]
    assert r["status"] == "accepted" and r["culprits"][0]["commit"] == sha(4)
    out = run(app, ["regressions", str(history), "--status", "fixed"])
    assert out.exit_code == 0 and "no regressions recorded with status fixed" in out.stdout
    out = run(app, ["regressions", str(history), "--format", "yaml"])
    assert out.exit_code == 2 and "--format" in out.output


def test_the_night_lock_is_let_go_when_a_night_fails(world):
    steps, history, night = world
    night(0)
    steps.record, original = (lambda k: (_ for _ in ()).throw(RuntimeError("boom"))), \
        steps.record
    with pytest.raises(RuntimeError):
        night(2)
    steps.record = original
    assert night(2).exit_code == 0


def test_a_real_sigkilled_night_leaves_nothing_that_stops_the_next(world, tmp_path):
    """A night process killed mid-run (SIGKILL: no clean-up at all)."""
    steps, history, night = world
    night(0)
    proc = hold(history)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.1)
    assert (history / store.HOLDER).exists()  # what it wrote stays, harmless
    assert night(2).exit_code == 0
    assert not (history / store.HOLDER).exists()

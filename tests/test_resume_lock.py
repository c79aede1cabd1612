"""`--resume` takes the artifact's lock before it reads the artifact, so two resumes of one
file never both read it and then write (the second would write back its stale view,
dropping the first one's cases); and a lock file replaced between a process's open and
its flock is not taken for the lock (records/io.py `locked`)."""

from __future__ import annotations

import fcntl
import os
import threading

import pytest

from mibench.engines import MibenchError
from mibench.harness.config import load_config
from mibench.harness.records import locked, read_artifact
from mibench.harness.run import runner as runner_module
from mibench.harness.run.plan import plan_of
from mibench.harness.testing import fake_factory, fixed_peak, write_config

CONFIG = """
name: lock
model: {path: "embedded:tiny"}
workload: {query_tokens: 6, num_items: 3, item_tokens: 2, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed}
"""


def interrupted(tmp_path, monkeypatch):
    """An artifact whose `packed` case failed: what a resume goes on with."""
    monkeypatch.chdir(tmp_path)  # outside the checkout: no commit to disagree about
    config = load_config(write_config(tmp_path, CONFIG))
    failing = fake_factory(fail={"packed": RuntimeError("boom")})
    runner_module.run(plan_of(config, out=tmp_path / "out", progress=False,
                              engine_factory=failing, peak=fixed_peak()))
    (path,) = (tmp_path / "out").glob("*.json")
    return config, path


def test_a_resume_of_a_locked_artifact_is_refused_before_reading_it(tmp_path, monkeypatch):
    """Before: the resume read the artifact, and only then found the lock."""
    config, path = interrupted(tmp_path, monkeypatch)
    reads = []
    monkeypatch.setattr(runner_module, "read_artifact",
                        lambda p: reads.append(p) or read_artifact(p))
    with locked(path):  # another run or resume is writing it
        with pytest.raises(MibenchError, match="is being written by another mibench "
                                               "process"):
            runner_module.run(plan_of(config, resume=path, progress=False,
                                      engine_factory=fake_factory(), peak=fixed_peak()))
    assert reads == []


def test_two_resumes_at_once_one_finishes_the_other_is_refused(tmp_path, monkeypatch):
    config, path = interrupted(tmp_path, monkeypatch)
    inside, release = threading.Event(), threading.Event()

    def hold(engine, n):  # the first resume, scoring: it holds the lock
        inside.set()
        release.wait(30)

    first_error: list[BaseException] = []

    def first():
        try:
            runner_module.run(plan_of(config, resume=path, progress=False,
                                      engine_factory=fake_factory(on_call=hold),
                                      peak=fixed_peak()))
        except BaseException as e:  # noqa: BLE001 - reported below
            first_error.append(e)

    thread = threading.Thread(target=first)
    thread.start()
    assert inside.wait(30)
    with pytest.raises(MibenchError, match="is being written"):
        runner_module.run(plan_of(config, resume=path, progress=False,
                                  engine_factory=fake_factory(), peak=fixed_peak()))
    release.set()
    thread.join(30)
    assert not first_error, first_error
    assert [c.status for c in read_artifact(path).cases] == ["ok", "ok"]


def test_a_lock_file_replaced_before_the_flock_is_not_a_lock(tmp_path, monkeypatch):
    """The holder finished (removed its lock file) between our open and our flock, and a
    third process made a new one and holds it: we must see that one, and be refused."""
    path = tmp_path / "a.json"
    lock = tmp_path / "a.json.lock"
    real_flock, third = fcntl.flock, []

    def flock(fd, op):
        if not third and op & fcntl.LOCK_EX:
            os.unlink(lock)  # the old holder lets go
            third.append(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
            real_flock(third[0], fcntl.LOCK_EX | fcntl.LOCK_NB)  # a third run takes it
        return real_flock(fd, op)

    lock.touch()
    monkeypatch.setattr(fcntl, "flock", flock)
    try:
        with pytest.raises(MibenchError, match="is being written"):
            with locked(path):
                pass
    finally:
        os.close(third[0])

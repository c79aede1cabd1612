"""Write failures mid-run: a file-size limit (for real: RLIMIT_FSIZE on a `mibench run`
process, SIGXFSZ ignored so the write fails with EFBIG), a full disk, a quota, a read-only
or unwritable folder. The message names the artifact, says what it holds and how to go on
(`--resume`), the exit is 4, and the last artifact written stays intact: a resume then
finishes the run with every case."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import EnvironmentFailed
from mibench.harness.cli import app
from mibench.harness.config import load_config
from mibench.harness.records import read_artifact
from mibench.harness.run import runner as runner_module
from mibench.harness.run.plan import RunOptions, make_plan
from mibench.harness.testing import fake_factory, fixed_peak, write_config

# the first two cases' records are small; the third records 800 items' scores (about
# 36 KB of artifact), so a 20 KB file-size limit lets two writes through and stops the
# third: measured 2.1 KB with no case, 4.3 KB and 6.5 KB with one and two
CONFIG = """
name: fsize
model: {path: "embedded:tiny", dtype: float32}
workload: {query_tokens: 4, num_items: 2, item_tokens: 1, label_token_ids: [198],
           delimiter: 151643, seed: 0}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed, mask: dense}
  - {engine: jax, mode: packed, mask: segment, workload: {num_items: 800}}
"""
LIMIT = 20_000
REAL = Path(__file__).parent / "data" / "reports" / "real-smoke.json"
BIG = "jax/packed/mask=segment/tp=1/items=800"


# sets the limit and ignores SIGXFSZ (so a write past it fails with EFBIG instead of
# killing the process), then becomes `python -m mibench.harness.cli ...` (exec keeps both)
LIMITED = ("import os, resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
           "n = int(sys.argv[1]); resource.setrlimit(resource.RLIMIT_FSIZE, (n, n)); "
           "os.execv(sys.executable, [sys.executable, '-m', 'mibench.harness.cli', "
           "*sys.argv[2:]])")


def mibench(args, fsize: int | None = None, cwd=None):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    limit = [sys.executable, "-c", LIMITED, str(fsize)] if fsize else \
        [sys.executable, "-m", "mibench.harness.cli"]
    return subprocess.run([*limit, *map(str, args)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=cwd)


@pytest.mark.slow
def test_a_file_size_limit_mid_run_names_the_artifact_exits_4_and_a_resume_finishes(
        tmp_path):
    from mibench.engines import model_folder

    model_folder("embedded:tiny")  # made before the limit (its files are larger)
    config = write_config(tmp_path, CONFIG)
    out = tmp_path / "out"
    # outside any checkout: a resume then sees the same (no) commit, never "uncommitted"
    first = mibench(["run", config, "--out", out, "--progress", "none"], fsize=LIMIT,
                    cwd=tmp_path)
    assert first.returncode == 4, first.stderr
    (path,) = out.glob("*.json")
    lines = first.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in first.stderr, first.stderr
    line = lines[0]
    assert line.startswith(f"error: {path}: cannot write the artifact: File too large "
                           "(EFBIG: a file-size limit (ulimit -f))"), line
    assert "holds 2 of 3 case(s) (in the config's order, the last " \
           "jax/packed/mask=dense/tp=1)" in line, line
    assert f"not saved: {BIG} (measured, measured again on resume)" in line, line
    resume = f"mibench run {config} --resume {path}"
    assert line.endswith(f"free space (or raise the limit) and go on with: {resume}"), line
    # the last good artifact is in place, whole, and nothing half-written beside it
    assert sorted(p.name for p in out.iterdir()) == [path.name]
    kept = read_artifact(path)
    assert [c.case_id for c in kept.cases] == ["jax/single/tp=1", "jax/packed/mask=dense/tp=1"]
    assert kept.finished_at is None and path.stat().st_size < LIMIT
    # the command it names finishes the run
    done = mibench(resume.split()[1:] + ["--progress", "none"], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    final = read_artifact(path)
    assert [c.status for c in final.cases] == ["ok", "ok", "ok"] and final.finished_at
    assert [c.case_id for c in final.cases][2] == BIG
    assert [c.timed_s for c in final.cases[:2]] == [c.timed_s for c in kept.cases]


FAKE = """
name: fake
model: {path: "embedded:tiny"}
workload: {query_tokens: 6, num_items: 3, item_tokens: 2, label_token_ids: [198],
           delimiter: 151643}
runs: {warmup: 0, timed: 3}
cases:
  - {engine: jax, mode: single}
  - {engine: jax, mode: packed}
  - {engine: jax, mode: chunked}
"""


def failing_writes(monkeypatch, code: int, after: int):
    """write_artifact fails with `code` from its write number `after` + 1 on."""
    real, calls = runner_module.write_artifact, []

    def write(record, path):
        calls.append(len(record.cases))
        if len(calls) > after:
            raise OSError(code, os.strerror(code), str(path.parent / f".{path.name}.x.tmp"))
        real(record, path)

    monkeypatch.setattr(runner_module, "write_artifact", write)
    return calls


@pytest.mark.parametrize("code,meaning", [
    (errno.ENOSPC, "ENOSPC: the disk is full"), (errno.EDQUOT, "EDQUOT: a disk quota"),
    (errno.EROFS, "EROFS: a read-only file system"), (errno.EACCES, "EACCES: no permission"),
])
def test_a_write_that_fails_after_two_cases_says_what_is_safe(tmp_path, monkeypatch, code,
                                                                 meaning):
    config = write_config(tmp_path, FAKE)
    plan = make_plan(load_config(config), RunOptions(out=tmp_path / "out", progress="none",
                                                     sets=("runs.timed=3",)),
                     config_path=config, engine_factory=fake_factory(), peak=fixed_peak())
    failing_writes(monkeypatch, code, after=3)  # the empty artifact, then cases 1 and 2
    with pytest.raises(EnvironmentFailed) as err:
        runner_module.run(plan)
    (path,) = (tmp_path / "out").glob("*.json")
    message = str(err.value)
    assert err.value.exit_code == 4 and message.startswith(f"{path}: cannot write the "
                                                           f"artifact: {os.strerror(code)} "
                                                           f"({meaning})")
    assert "holds 2 of 3 case(s) (in the config's order, the last jax/packed/tp=1); " \
           "not saved: jax/chunked/tp=1" in message
    assert message.endswith(f"go on with: mibench run {config} --set runs.timed=3 --resume "
                            f"{path}")
    assert [c.case_id for c in read_artifact(path).cases] == ["jax/single/tp=1",
                                                              "jax/packed/tp=1"]


def test_a_write_that_fails_before_any_artifact_says_so(tmp_path, monkeypatch):
    config = write_config(tmp_path, FAKE)
    plan = make_plan(load_config(config), RunOptions(out=tmp_path / "out", progress="none"),
                     config_path=config, engine_factory=fake_factory(), peak=fixed_peak())
    failing_writes(monkeypatch, errno.ENOSPC, after=0)
    with pytest.raises(EnvironmentFailed, match="the run stopped before any artifact was "
                                                "written; free space .* and run again$"):
        runner_module.run(plan)
    assert not list((tmp_path / "out").glob("*.json"))


def test_a_resume_whose_first_write_fails_keeps_the_file_as_it_was(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # outside the checkout: no uncommitted changes to refuse
    config = write_config(tmp_path, FAKE)
    fail_chunked = fake_factory(fail={"chunked": RuntimeError("boom")})
    plan = make_plan(load_config(config), RunOptions(out=tmp_path / "out", progress="none"),
                     config_path=config, engine_factory=fail_chunked, peak=fixed_peak())
    runner_module.run(plan)
    (path,) = (tmp_path / "out").glob("*.json")
    before = path.read_bytes()
    failing_writes(monkeypatch, errno.EFBIG, after=0)
    again = make_plan(load_config(config), RunOptions(resume=path, progress="none"),
                      config_path=config, engine_factory=fake_factory(), peak=fixed_peak())
    with pytest.raises(EnvironmentFailed, match="holds what it held before this resume; "
                                                "free space .* go on with: mibench run .* "
                                                "--resume"):
        runner_module.run(again)
    assert path.read_bytes() == before


def test_the_cli_exits_4_with_one_line(tmp_path, monkeypatch):
    def failing(plan):
        raise EnvironmentFailed("cannot write the artifact: No space left on device",
                                field=str(tmp_path / "a.json"))

    monkeypatch.setattr(runner_module, "run", failing)
    config = write_config(tmp_path, FAKE)
    result = CliRunner().invoke(app, ["run", str(config), "--out", str(tmp_path / "out")])
    assert result.exit_code == 4, result.output
    assert result.output.strip() == f"error: {tmp_path / 'a.json'}: cannot write the " \
                                    "artifact: No space left on device"


def test_artifacts_are_fsynced_before_they_replace_the_last(tmp_path, monkeypatch):
    """A disk that fills at write-back (delayed allocation, NFS) fails the write, before
    the rename replaces the last good artifact."""
    from mibench.harness.records import write_artifact

    order = []
    monkeypatch.setattr(os, "fsync", lambda fd: order.append("fsync"))
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (order.append("replace"),
                                                     real_replace(a, b)))
    write_artifact(read_artifact(REAL), tmp_path / "b.json")
    assert order == ["fsync", "replace"]


TORCH_ONLY = """
name: comp
model: {path: "embedded:tiny"}
workload: {query_tokens: 6, num_items: 3, item_tokens: 2, label_token_ids: [198]}
cases:
  - {engine: torch, mode: single}
  - {engine: torch, mode: prefill_extend}
"""


def test_compile_whose_artifact_cannot_be_written_exits_4_saying_what_it_holds(
        tmp_path, monkeypatch):
    """Same policy as `run` (no --resume there: compile again); torch cases are skipped, so
    nothing is compiled and no libtpu is needed."""
    from mibench.harness.records import io

    real, calls = io.write_artifact, []

    def write(record, path):
        calls.append(path)
        if len(calls) == 3:  # the empty artifact and case 1 went through
            raise OSError(errno.EFBIG, "File too large")
        real(record, path)

    monkeypatch.setattr(io, "write_artifact", write)
    config = write_config(tmp_path, TORCH_ONLY)
    argv = ["/x/mibench", "compile", str(config), "--target", "v6e-1", "--out",
            str(tmp_path / "out")]
    monkeypatch.setattr(sys, "argv", argv)  # what the command names to compile again
    result = CliRunner().invoke(app, argv[1:])
    assert result.exit_code == 4, result.output
    (path,) = (tmp_path / "out").glob("*.json")
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: {path}: cannot write the artifact: File too large (EFBIG: "
                           "a file-size limit (ulimit -f)); it stopped; the artifact as last "
                           "written is intact and holds 1 of 2 case(s); free space"), line
    assert line.endswith(f"compile again: mibench compile {config} --target v6e-1 --out "
                         f"{tmp_path / 'out'}"), line
    assert len(json.loads(path.read_text())["cases"]) == 1


def test_checkpoints_before_any_write_say_nothing_was_written(tmp_path, monkeypatch):
    from mibench.harness.ab.rounds import checkpoints
    from mibench.harness.records import io

    def full(record, path):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io, "write_artifact", full)
    saves = checkpoints(tmp_path / "ab.json", 4, ["/bin/mibench", "ab", "a", "b", "c.yaml"])
    with pytest.raises(EnvironmentFailed, match=r"ab.json: cannot write the artifact: No space "
                                                r"left on device \(ENOSPC: the disk is full\); "
                                                r"it stopped before any artifact was written; "
                                                r"free space .* run the A/B again: mibench ab "
                                                r"a b c.yaml$"):
        saves.save(read_artifact(REAL), 0)

"""Nothing mibench writes can hurt its reader, and nothing it reads can hang or swamp it:
CSV cells that a spreadsheet would run as formulas are escaped (numbers stay numbers);
`report`, `compare`, `export` (and every reader) refuse a FIFO and /dev/zero at once and
bound what they read; every writer writes whole or not at all and names its path when it
cannot (a full disk: a real small tmpfs where this machine can mount one, else ENOSPC
faked at the write, as tests/test_write_failures.py does)."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mibench.errors import EnvironmentFailed
from mibench.files import Unreadable, read_bounded
from mibench.harness.cli import app
from mibench.harness.records import io as records_io
from mibench.harness.records import read_artifact
from mibench.harness.report.exporters.csv import export as csv_export
from mibench.harness.report.exporters.csv import safe_cell

DATA = Path(__file__).parent / "data" / "reports"
NEW = DATA / "new.json"


def cli(*args):
    return CliRunner().invoke(app, [*map(str, args)])


# --- CSV injection ----------------------------------------------------------------------

@pytest.mark.parametrize("text", ["=1+1", "+1+1", "-2+3", "@SUM(1+1)", "\t=1", "\r=1",
                                  "=cmd|' /C calc'!A0", "-inf", "- 5"])
def test_formula_text_is_escaped(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", [-1.5, -3, 0, 2.5e-7, "-12.5", "+4", "1e-3", "main",
                                   "a=b", None, True])
def test_numbers_and_plain_text_stay_as_they_are(value):
    assert safe_cell(value) == value


def test_an_exported_branch_named_like_a_formula_is_text(tmp_path):
    """The issue's probe: a git branch `@SUM(1+1)` (a valid name) landed in the CSV as a
    formula. Numbers, negative ones included, come out as numbers."""
    data = json.loads(NEW.read_text())
    data["provenance"]["git"]["branch"] = "@SUM(1+1)"
    data["config"]["name"] = "=HYPERLINK(\"http://x\")"
    record = read_artifact(_write(tmp_path / "a.json", data))
    rows = list(csv.DictReader(io.StringIO(csv_export([record]))))
    assert rows[0]["branch"] == "'@SUM(1+1)"
    assert rows[0]["config"] == "'=HYPERLINK(\"http://x\")"
    assert float(rows[0]["time_s"]) > 0 and rows[0]["commit"] == data["provenance"]["git"][
        "commit"]


def test_negative_numbers_are_written_as_numbers(monkeypatch):
    from mibench.harness.report.exporters import csv as csv_module
    from mibench.harness.report.exporters.rows import COLUMNS

    row = dict.fromkeys(COLUMNS)
    row.update(time_s=-0.25, items=-3, mfu=-1e-07, error="-not a number")
    monkeypatch.setattr(csv_module, "case_rows", lambda records: [row])
    (out,) = csv.DictReader(io.StringIO(csv_export([])))
    assert (out["time_s"], out["items"], out["mfu"]) == ("-0.25", "-3", "-1e-07")
    assert out["error"] == "'-not a number"


def _write(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path


# --- readers: not a regular file, or too large -----------------------------------------

@contextlib.contextmanager
def fifo(tmp_path):
    path = tmp_path / "artifact.json"
    os.mkfifo(path)
    try:
        yield path
    finally:
        path.unlink()


@pytest.mark.parametrize("command", [["report"], ["compare", NEW], ["export"]])
@pytest.mark.parametrize("source", ["fifo", "/dev/zero"])
def test_readers_refuse_what_is_not_a_regular_file_at_once(tmp_path, command, source):
    """Before: /dev/zero grew to 4.4 GB and then gave a traceback; a FIFO hung them."""
    with contextlib.ExitStack() as stack:
        path = stack.enter_context(fifo(tmp_path)) if source == "fifo" else Path(source)
        done: list = []
        worker = threading.Thread(target=lambda: done.append(cli(*command, path)),
                                  daemon=True)
        worker.start()
        worker.join(60)
        assert done, f"{command[0]} hung on {source}"
    out = done[0]
    assert out.exit_code == 2, out.output
    assert "is not a regular file" in out.stderr and str(path) in out.stderr, out.stderr


def test_a_growing_or_large_file_is_read_no_further_than_its_bound(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(2048)
    with pytest.raises(Unreadable, match="is 2048 bytes, more than the 1024"):
        read_bounded(big, 1024, "artifact file")
    assert read_bounded(big, 4096) == b"\0" * 2048
    with pytest.raises(Unreadable, match="no such artifact file"):
        read_bounded(tmp_path / "none.json", 10, "artifact file")
    with pytest.raises(Unreadable, match="is a folder, not an artifact"):
        read_bounded(tmp_path, 10, "artifact")
    monkey = records_io.MAX_ARTIFACT_BYTES
    try:
        records_io.MAX_ARTIFACT_BYTES = 100
        out = cli("report", NEW)
        assert out.exit_code == 2 and "more than the 100 an artifact file may have" in \
            out.stderr, out.stderr
    finally:
        records_io.MAX_ARTIFACT_BYTES = monkey


@pytest.mark.parametrize("args", [["validate"], ["score", "--request"]])
def test_config_and_request_readers_refuse_a_fifo_too(tmp_path, args):
    with fifo(tmp_path) as path:
        out = cli(*args, path)
    assert out.exit_code == 2 and "is not a regular file" in out.stderr, out.output



REQUESTS_CONFIG = """\
name: r
model: {path: "embedded:tiny"}
workload: {requests: REQ, label_token_ids: [198], delimiter: 151643}
runs: {warmup: 0, timed: 1}
cases:
  - {engine: jax, mode: single}
"""


def _requests_config(tmp_path, requests: str, extra: str = "") -> Path:
    config = tmp_path / "c.yaml"
    config.write_text(REQUESTS_CONFIG.replace("REQ", requests) + extra)
    return config


@pytest.mark.parametrize("command", [["validate"], ["run", "--out", "{T}/out"]])
def test_a_requests_file_past_its_bound_is_refused_by_its_size(tmp_path, command):
    """Issue 45: a 2 GB requests file was read whole (31 s, 4.1 GB) before a refusal that
    named 56 GiB of token lists; it is refused from its size (a sparse file here), validate
    and run alike, naming the file and the bound."""
    from mibench.workloads.jsonl import MAX_REQUESTS_BYTES

    big = tmp_path / "big.jsonl"
    with open(big, "wb") as f:
        f.truncate(2 * 1024**3)
    config = _requests_config(tmp_path, big.name)
    out = cli(command[0], config, *[a.replace("{T}", str(tmp_path)) for a in command[1:]])
    assert out.exit_code == 2, out.output
    line, = out.stderr.strip().splitlines()
    assert "workload.requests" in line and str(big) in line, line
    assert f"is {2 * 1024**3} bytes, more than the {MAX_REQUESTS_BYTES} a requests file" \
        in line, line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def _loop(tmp_path, name: str) -> Path:
    a, b = tmp_path / name, tmp_path / f"{name}.other"
    a.symlink_to(b.name)
    b.symlink_to(a.name)
    return a


@pytest.mark.parametrize("where", ["requests", "include", "references", "config",
                                   "request", "artifact"])
def test_a_symbolic_link_loop_is_one_line_naming_it(tmp_path, where):
    """Issue 45: a requests path that is a link loop gave a traceback and exit 1 (Python
    3.11's Path.resolve raises RuntimeError); so did an include's and a references file's."""
    loop = _loop(tmp_path, "loop.jsonl")
    good = tmp_path / "good.jsonl"
    good.write_text('{"query": [1, 2], "items": [[3]]}\n')
    if where == "requests":
        args = ["validate", _requests_config(tmp_path, loop.name)]
    elif where == "include":
        args = ["validate", _requests_config(tmp_path, good.name, f"include: {loop.name}\n")]
    elif where == "references":
        args = ["validate", _requests_config(tmp_path, good.name, f"references: {loop.name}\n")]
    elif where == "config":
        args = ["validate", loop]
    elif where == "request":
        args = ["score", "--model", "embedded:tiny", "--labels", "198", "--request", loop]
    else:
        args = ["compare", NEW, loop]
    out = cli(*args)
    assert out.exit_code == 2, out.output
    line, = out.stderr.strip().splitlines()
    assert "symbolic link loop" in line and loop.name in line, line


def test_a_requests_fifo_is_refused_unread(tmp_path):
    path = tmp_path / "r.jsonl"
    os.mkfifo(path)
    out = cli("validate", _requests_config(tmp_path, path.name))
    assert out.exit_code == 2 and "is not a regular file" in out.stderr, out.output


def test_a_checkpoint_reads_its_json_through_the_bounded_reader(tmp_path):
    """A checkpoint's config.json that is a FIFO or a link loop is refused unread, naming
    it (it was read with read_bytes: a FIFO hung `validate`)."""
    from mibench.engines import model_facts
    from mibench.errors import MibenchError

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"")
    _loop(folder, "config.json")
    with pytest.raises(MibenchError, match="symbolic link loop"):
        model_facts(str(folder))
    for p in folder.glob("config.json*"):
        p.unlink()
    os.mkfifo(folder / "config.json")
    done: list = []
    worker = threading.Thread(target=lambda: done.append(_facts_error(folder)), daemon=True)
    worker.start()
    worker.join(60)
    assert done and "is not a regular file" in done[0], done


def _facts_error(folder) -> str:
    from mibench.engines import model_facts

    try:
        model_facts(str(folder))
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        return str(e)
    return ""

# --- writers: whole or not at all, naming the path ---------------------------------------

@contextlib.contextmanager
def full_disk(tmp_path, monkeypatch):
    """A folder on a 64 KiB tmpfs (mounted for the test where this machine lets it), or,
    where it cannot, a folder whose writes fail with ENOSPC after 4 KiB (records/io.py's
    atomic write, where every writer goes)."""
    folder = tmp_path / "full"
    folder.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs",
                                  str(folder)], capture_output=True).returncode == 0
    except OSError:  # no mount command here
        mounted = False
    if not mounted:
        real = os.fdopen

        def small(fd, mode="r", *a, **kw):
            f = real(fd, mode, *a, **kw)
            if "w" not in mode:
                return f
            write = f.write

            def limited(data):
                if len(data) > 4096:
                    write(data[:4096])
                    raise OSError(errno.ENOSPC, "No space left on device")
                return write(data)

            f.write = limited
            return f

        monkeypatch.setattr(records_io.os, "fdopen", small)
    try:
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)


@pytest.mark.parametrize("command,name", [
    (["export", "MANY", "--format", "json", "--out"], "cases.json"),
    (["export", "MANY", "--format", "csv", "--out"], "cases.csv"),
    (["report", NEW, "--out"], "report.md"),  # its plots (~80 KB each) fill the disk first
    (["history", DATA, "--out"], "history.md"),
])
def test_a_full_disk_names_the_file_exits_4_and_leaves_no_partial_file(
        tmp_path, monkeypatch, command, name):
    """Before: `export` left half a file on a full disk, and the error named no path."""
    if "MANY" in command:  # an export larger than the disk
        data = json.loads(NEW.read_text())
        data["cases"] = [{**json.loads(json.dumps(c)), "case_id": f"{c['case_id']}/copy={k}"}
                         for k in range(40) for c in data["cases"]]
        command = [_write(tmp_path / "many.json", data) if c == "MANY" else c
                   for c in command]
    with full_disk(tmp_path, monkeypatch) as folder:
        out = cli(*command, folder / name)
        line = out.stderr.strip().splitlines()[-1]
        assert out.exit_code == 4, out.output
        assert line.startswith(f"error: {folder}/") and ": cannot write the " in line, line
        assert "No space left on device (ENOSPC: the disk is full)" in line, line
        named = Path(line.removeprefix("error: ").split(": cannot write")[0])
        left = sorted(p.name for p in folder.iterdir())
        assert named.name not in left and not any(n.endswith(".tmp") for n in left), left


def test_model_make_on_a_full_disk_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    from mibench.harness.commands import model as model_command

    def fails(preset, out):
        (out / "config.json").write_text("{}")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("mibench.engines.make_model", fails)
    out_dir = tmp_path / "tiny"
    out_dir.mkdir()
    with pytest.raises(EnvironmentFailed, match=f"^{out_dir}: cannot write the model's "
                                                "files: No space left on device"):
        model_command.make_whole("tiny", out_dir)
    assert list(out_dir.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["tiny"]


def test_the_atomic_write_keeps_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "out.csv"
    path.write_text("the old one\n")
    monkeypatch.setattr(records_io.os, "fsync", lambda fd: (_ for _ in ()).throw(
        OSError(errno.EIO, "Input/output error")))
    with pytest.raises(EnvironmentFailed, match=r"cannot write the output: Input/output "
                                                r"error \(EIO: an I/O error\)"):
        records_io.write_output(path, "x" * 100)
    assert path.read_text() == "the old one\n" and len(list(tmp_path.iterdir())) == 1


def test_readers_bound_is_quick_on_dev_zero():
    t0 = time.monotonic()
    with pytest.raises(Unreadable, match="not a regular file"):
        read_bounded("/dev/zero", 1 << 30)
    assert time.monotonic() - t0 < 5
    assert sys.platform.startswith("linux")

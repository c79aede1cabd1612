"""Reading and writing artifacts: atomic writes, validated reads that refuse any other
schema with a message that says what to do (and any `NaN` or `Infinity`, which Python's
json would accept but no artifact holds), the lock a run holds on its artifact, and the
JSON Schema of each kind (shipped in `harness/records/schemas/`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from mibench.errors import EnvironmentFailed, MibenchError
from mibench.files import read_bounded

from .base import Artifact, nonfinite_at

SCHEMAS = Path(__file__).parent / "schemas"
# the largest artifact a reader takes: an http case of 100,000 requests is ~15 MB, and
# parsing JSON holds several times the file in memory
MAX_ARTIFACT_BYTES = 512 * 1024**2


def schema_file(name: str) -> Path:
    """The shipped JSON Schema of an artifact kind: `mibench.run/2` -> mibench.run-2.schema.json."""
    return SCHEMAS / f"{name.replace('/', '-')}.schema.json"


def write_artifact(record: Artifact, path: Path) -> None:
    """Atomic: a reader (or a crash) never sees a half-written file, and a write that fails
    (a full disk, a file-size limit) leaves the file as it was and no temporary file."""
    write_atomic(Path(path), record.to_json())


def write_atomic(path: Path, data: str | bytes) -> None:
    """`data` to `path` through a temporary file beside it, fsynced, then renamed over it:
    what was at `path` stays whole until the new file is; an OSError leaves no temporary
    file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; artifacts are ordinary files
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())  # a disk that fills at write-back fails here, not later
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_output(path: Path, data: str | bytes, what: str = "the output") -> None:
    """A command's output file (a report, an export, a plot), written atomically; a write
    that fails is one EnvironmentFailed (exit 4) naming the file and why, and leaves what
    was there as it was."""
    path = Path(path)
    try:
        write_atomic(path, data)
    except OSError as e:
        raise EnvironmentFailed(f"cannot write {what}: {why_not_written(e)}; nothing was "
                                "written there (a file already there is as it was)",
                                field=str(path)) from None


# what a write failure means, beside the system's words (an artifact write that fails for
# any reason is the environment's failure: the record itself always serializes)
WRITE_ERRORS = {errno.ENOSPC: "the disk is full", errno.EFBIG: "a file-size limit (ulimit -f)",
                errno.EDQUOT: "a disk quota", errno.EROFS: "a read-only file system",
                errno.EACCES: "no permission", errno.EPERM: "no permission",
                errno.ENOENT: "the folder went away", errno.EIO: "an I/O error"}


def why_not_written(e: OSError) -> str:
    """The system's words, the errno and what it means: `No space left on device (ENOSPC:
    the disk is full)`."""
    why = e.strerror or type(e).__name__
    code = errno.errorcode.get(e.errno or 0)
    meaning = WRITE_ERRORS.get(e.errno or 0)
    detail = ": ".join(x for x in (code, meaning) if x)
    return f"{why}{f' ({detail})' if detail else ''}"


def write_failed(e: OSError, path: Path, safe: str, go_on: str,
                 what: str = "the artifact") -> EnvironmentFailed:
    """The one message of an artifact that could not be written mid-run (exit 4): the path,
    why (the system's words, the errno, what it means), what is safe, how to go on; `what`
    names another file that failed beside it (a server's log)."""
    return EnvironmentFailed(f"cannot write {what}: {why_not_written(e)}; {safe}; {go_on}",
                             field=str(path))


class Checkpoints:
    """An artifact rewritten as its work finishes (`mibench compile`, `ab`): `save(record,
    done)` writes it atomically; a write that fails is an EnvironmentFailed (exit 4) saying
    what the last good write holds (`done` of `total` `unit`s) and `go_on`."""

    def __init__(self, path: Path, total: int, unit: str, go_on: str):
        self.path, self.total, self.unit, self.go_on = Path(path), total, unit, go_on
        self.held: int | None = None  # what the file holds, once written

    def save(self, record: Artifact, done: int) -> None:
        try:
            write_artifact(record, self.path)
        except OSError as e:
            safe = ("it stopped before any artifact was written" if self.held is None else
                    f"it stopped; the artifact as last written is intact and holds "
                    f"{self.held} of {self.total} {self.unit}")
            raise write_failed(e, self.path, safe, self.go_on) from None
        self.held = done


def read_json(path: str | Path, model: type[Artifact], schema: str, how: str = "",
              older: tuple[str, ...] = ()) -> Artifact:
    """Read and validate an artifact of kind `schema` into `model`; every unreadable input
    is one MibenchError naming the file (`how`: what to do about another schema). An
    artifact of an `older` version of the kind (whose fields the newer one keeps, with the
    same meaning, only adding optional ones) is read as the newer."""
    path = Path(path)
    bare: list[str] = []  # NaN, Infinity, -Infinity: Python's json takes them, JSON does not

    def constant(name: str) -> float:
        bare.append(name)
        return float(name)

    raw = read_bounded(path, MAX_ARTIFACT_BYTES, "artifact file")
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=constant)
    except json.JSONDecodeError as e:
        raise MibenchError(f"not JSON: {e.msg}", field=str(path)) from None
    except RecursionError:
        raise MibenchError("not an artifact: JSON nested too deeply", field=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise MibenchError(f"cannot read: {reason}", field=str(path)) from None
    if bare:
        raise MibenchError(f"{nonfinite_at(data) or bare[0]}, which is not standard JSON (an "
                           "artifact holds finite numbers only)", field=str(path))
    found = data.get("schema") if isinstance(data, dict) else None
    if found in older:
        data = {**data, "schema": schema}
    if found != schema and found not in older:
        raise MibenchError(f"schema {found!r} is not {schema!r}{how}", field=str(path))
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MibenchError(f"invalid {schema} artifact at {where}: {first['msg']}",
                           field=str(path)) from None


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open file `fd` is still the file at `path`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _named_by_title(schema: dict) -> dict:
    """The schema with each definition named by its title, where pydantic names it by its
    class: workloads' `WorkloadSpec` is the artifacts' `WorkloadRecord`."""
    renamed = {k: d["title"] for k, d in schema.get("$defs", {}).items()
               if d.get("title", k) != k}
    if not renamed:
        return schema
    text = json.dumps(schema)
    for old, new in renamed.items():
        text = text.replace(json.dumps(f"#/$defs/{old}"), json.dumps(f"#/$defs/{new}"))
    schema = json.loads(text)
    schema["$defs"] = dict(sorted((renamed.get(k, k), d) for k, d in schema["$defs"].items()))
    return schema


def json_schema(model: type[Artifact], name: str) -> dict:
    """The JSON Schema of an artifact model (records/__init__.py lists every kind)."""
    schema = _named_by_title(model.model_json_schema(by_alias=True))
    schema["required"] = ["schema", *schema["required"]]  # defaulted in Python, not in files
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"https://mibench.dev/schemas/{schema_file(name).name}",
            **schema, "title": name}


@contextlib.contextmanager
def locked(path: Path):
    """Hold `PATH.lock` (an advisory flock, released by the kernel if this process dies)
    while an artifact is being written: a second run or resume of it is a MibenchError.
    The holder removes the file as it lets go, so a lock taken on a file that is no
    longer the one at `PATH.lock` (its holder finished between our open and our flock,
    and a third process may hold the new one) is not a lock: it is taken again."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise MibenchError("is being written by another mibench process (it holds "
                               f"{lock.name}); wait for it to finish",
                               field=str(path)) from None
        if _same_file(fd, lock):
            break
        os.close(fd)  # a removed lock file: try the one at the path now
    try:
        yield
    finally:
        # a folder that became read-only or immutable keeps the file: harmless, the lock is
        # the flock, let go below (and an error here would hide the one that matters)
        with contextlib.suppress(OSError):
            lock.unlink(missing_ok=True)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

"""The artifact: one typed record per run, schema `mibench.run/1` (see DESIGN.md, Artifacts).

`write_artifact` writes atomically (temp file + os.replace); `read_artifact` refuses any
other schema version with a message that says what to do. The JSON Schema shipped in
`harness/schemas/mibench.run-1.schema.json` is generated from these models
(`python -m mibench.harness.records` rewrites it).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mibench.errors import MibenchError
from mibench.harness import SCHEMA

SCHEMA_FILE = Path(__file__).parent / "schemas" / "mibench.run-1.schema.json"


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Summary(Record):
    """Statistics of one quantity over the timed runs (see harness.stats)."""

    median: float
    mean: float
    min: float
    max: float
    stdev: float  # sample standard deviation; 0 for a single run
    n: int


class Metrics(Record):
    """Derived from the timed runs of one case."""

    throughput_items_per_s: Summary | None = None
    latency_per_item_ms: Summary | None = None
    total_s: Summary | None = None  # wall time of one run (all items)
    tokens_per_s: float | None = None  # workload tokens (query once + items) / median time
    useful_flops: float | None = None  # minimal work of one run (harness.metrics)
    peak_flops: float | None = None  # the peak `mfu` divides by (per chip x tp)
    mfu: float | None = None  # useful_flops / (median time x peak_flops)
    peak_memory_bytes: int | None = None
    peak_memory_source: str | None = None  # "device" (memory_stats), "rss" (sampled in case)
    score_digest: str | None = None  # sha256 of the first call's scores (harness.metrics)


class ErrorInfo(Record):
    type: str
    message: str
    traceback: str


class CaseRecord(Record):
    """One expanded case and everything measured for it."""

    case_id: str
    engine: str
    mode: str
    params: dict
    # what the options resolved to on this machine, e.g. {"attention": "cudnn"} for auto
    resolved: dict = {}
    model: dict  # {path, dtype}
    topology: dict  # {tp}
    workload: dict  # the expanded workload (harness WorkloadSpec.as_dict)
    runs: dict  # {warmup, timed, timeout_s}
    status: Literal["ok", "failed", "skipped"]
    error: ErrorInfo | None = None
    started_at: str
    compile_s: float | None = None  # the first call: compilation plus one run
    warmup_s: list[float] = []
    timed_s: list[float] = []  # every timed run, in order
    metrics: Metrics = Metrics()


class ParityCheck(Record):
    """One comparison: `case_id`'s scores against `against`'s on the parity workload; for
    `speedup`, `case_id`'s median items/s over `against`'s, measured by the cases."""

    check: Literal["isolation", "modes", "engines", "topologies", "speedup"]
    variant: str | None = None  # isolation: same_length / changed_length
    case_id: str
    against: str
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    # max |a - b| / |b|: what an absolute tolerance cannot see when scores are tiny
    # full-vocabulary probabilities (apply_softmax false); recorded, not gated
    max_rel_diff: float | None = None
    tolerance: float  # speedup: the minimum ratio (parity.min_speedup)
    # speedup: the two cases' median items/s and their ratio (case over against)
    throughput_items_per_s: float | None = None
    against_throughput_items_per_s: float | None = None
    speedup: float | None = None
    status: Literal["passed", "failed", "error"]
    error: str | None = None


class ParityRecord(Record):
    reference: dict  # {engine, mode, dtype}
    workload: dict  # the parity workload (a small sub-workload when the main one is big)
    checks: list[ParityCheck] = []
    passed: bool


class GitInfo(Record):
    path: str
    commit: str | None = None
    branch: str | None = None
    dirty: bool | None = None


class Devices(Record):
    platform: str | None = None
    kind: str | None = None
    count: int | None = None
    peak_flops: dict[str, float] = {}  # dtype -> per-chip FLOP/s
    peak_source: str | None = None  # "calibrated" (CPU matmul) or "vendor"


class Provenance(Record):
    git: GitInfo
    engine_repo: GitInfo | None = None
    packages: dict[str, str | None]
    devices: Devices
    host: dict
    python: str
    argv: list[str]
    env: dict[str, str]


class RunRecord(Record):
    """A whole run: written after every case, so a partial one has `finished_at` null."""

    schema_: Literal["mibench.run/1"] = Field(default=SCHEMA, alias="schema")
    run_id: str
    started_at: str
    finished_at: str | None = None
    resumed_at: list[str] = []
    config: dict
    config_sha256: str
    provenance: Provenance
    cases: list[CaseRecord] = []
    parity: ParityRecord | None = None

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=1) + "\n"


def write_artifact(record: RunRecord, path: Path) -> None:
    """Atomic: a reader (or a crash) never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; artifacts are ordinary files
    try:
        with os.fdopen(fd, "w") as f:
            f.write(record.to_json())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_artifact(path: str | Path) -> RunRecord:
    """Read and validate an artifact; every unreadable input is one MibenchError."""
    path = Path(path)
    if path.is_dir():
        raise MibenchError("is a folder, not an artifact file", field=str(path))
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise MibenchError("no such artifact", field=str(path)) from None
    except json.JSONDecodeError as e:
        raise MibenchError(f"not JSON: {e.msg}", field=str(path)) from None
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
        raise MibenchError(f"cannot read: {reason}", field=str(path)) from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise MibenchError(f"schema {schema!r} is not {SCHEMA!r}; this mibench reads only "
                           f"{SCHEMA} artifacts (re-run the config with this version)",
                           field=str(path))
    try:
        return RunRecord.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MibenchError(f"invalid {SCHEMA} artifact at {where}: {first['msg']}",
                           field=str(path)) from None


def json_schema() -> dict:
    schema = RunRecord.model_json_schema(by_alias=True)
    schema["required"] = ["schema", *schema["required"]]  # defaulted in Python, not in files
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://mibench.dev/schemas/mibench.run-1.schema.json",
            **schema, "title": SCHEMA}


if __name__ == "__main__":
    SCHEMA_FILE.write_text(json.dumps(json_schema(), indent=1) + "\n")
    print(f"wrote {SCHEMA_FILE}")

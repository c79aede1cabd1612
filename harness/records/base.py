"""What every artifact kind shares: the record base classes, the header every artifact
starts with (schema, run id, times, the resolved config and its hash, provenance), the
provenance itself and a failure's error."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Artifact(Record):
    """The top level of an artifact file (run, A/B, compile): its `schema` names the kind."""

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", by_alias=True), indent=1) + "\n"


class ErrorInfo(Record):
    type: str
    message: str
    traceback: str


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


class Invocation(Record):
    """How `mibench run` was asked for the run: the config file, its `--set` overrides and
    a multi-process run's flags (what the report's reproduce commands start from)."""

    config: str
    sets: list[str] = []
    options: list[str] = []  # --coordinator, --num-processes, --process-id with values


class Provenance(Record):
    git: GitInfo
    engine_repo: GitInfo | None = None
    packages: dict[str, str | None]
    devices: Devices
    host: dict
    python: str
    argv: list[str]
    env: dict[str, str]
    invocation: Invocation | None = None  # absent in artifacts of mibench before it


class Header(Artifact):
    """The fields every artifact kind starts with; each kind pins `schema` to its name."""

    schema_: str = Field(alias="schema")
    run_id: str
    started_at: str
    finished_at: str | None = None
    config: dict  # the fully resolved config
    config_sha256: str
    provenance: Provenance

"""What every artifact kind shares: the record base classes, the header every artifact
starts with (schema, run id, times, the resolved config and its hash, provenance), the
provenance itself and a failure's error.

Artifacts are standard JSON: no NaN or Infinity anywhere. A record's float fields refuse
them (`allow_inf_nan=False`); a derived metric that can come out undefined (`Measured`: a
ratio over a zero, a cost the compiler did not report) is null instead; `to_json` refuses
whatever is left, naming the field.
"""

from __future__ import annotations

import json
import math
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


def finite_or_none(value):
    """A non-finite float as None (the metric is undefined), anything else as it is."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


# a derived metric: a NaN or an infinity (0/0, x/0, a missing cost) is stored as null
Measured = Annotated[float | None, BeforeValidator(finite_or_none)]


class Record(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, allow_inf_nan=False)


def nonfinite_at(value, path: str = "") -> str | None:
    """`path is NaN` (the dotted path of the first NaN or infinity in plain JSON-like data,
    e.g. `cases.0.metrics.mfu is Infinity`), or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path or 'the value'} is {json.dumps(value)}"
    items = (value.items() if isinstance(value, dict) else
             enumerate(value) if isinstance(value, list | tuple) else ())
    for key, inner in items:
        found = nonfinite_at(inner, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


class Artifact(Record):
    """The top level of an artifact file (run, A/B, compile): its `schema` names the kind."""

    def to_json(self) -> str:
        """Standard JSON (`allow_nan=False`): a NaN or an infinity that reached the record
        is a ValueError naming its field, never a bare `NaN` in the file."""
        data = self.model_dump(mode="json", by_alias=True)
        try:
            return json.dumps(data, indent=1, allow_nan=False) + "\n"
        except ValueError:
            where = nonfinite_at(data)
            if where is None:
                raise
            raise ValueError(f"artifact field {where}: artifacts hold standard JSON only (a "
                             "bug: it should have been refused or made null where it was "
                             "computed)") from None


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

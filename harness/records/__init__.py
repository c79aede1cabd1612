"""Every artifact mibench writes, as versioned pydantic records (docs/artifacts.md): the
run (`run`), the A/B run (`ab`) and the compile run (`compile`), all starting with one
header (`base`), their cases sharing typed sub-records (`case`: model, topology, workload,
runs), and the nightly loop's history index and night summary (`nightly`), read and
written by `io`. Their JSON Schemas are shipped in `schemas/`;
`python -m mibench.harness.records` rewrites them from the models, and a test checks the
shipped files match.
"""

from __future__ import annotations

from mibench.workloads.spec import ItemRange

from .ab import AB_OLDER, AB_SCHEMA, ABCase, ABRecord, read_ab
from .base import (
    Artifact,
    Devices,
    ErrorInfo,
    GitInfo,
    Header,
    Invocation,
    Provenance,
    Record,
)
from .case import (
    CaseHead,
    DeviceRef,
    ModelRef,
    RunsRecord,
    Sparse,
    TopologyRecord,
    WorkloadRecord,
)
from .compile import (
    COMPILE_OLDER,
    COMPILE_SCHEMA,
    CaseCompile,
    CompileCase,
    CompileRecord,
    CompileTarget,
    LibTpu,
    read_compile_artifact,
)
from .io import (
    Checkpoints,
    json_schema,
    locked,
    read_json,
    schema_file,
    write_artifact,
    write_failed,
)
from .nightly import (
    NIGHTLY_SCHEMA,
    SUMMARY_SCHEMA,
    NightlyIndex,
    NightSummary,
)
from .outputs import COMPARE_SCHEMA, COMPILE_COMPARE_SCHEMA, EXPORT_SCHEMA, HISTORY_SCHEMA
from .references import ReferenceFigure, ReferenceSet
from .run import (
    OLDER,
    PASSING,
    SCHEMA,
    SCHEMA_FILE,
    CaseLoad,
    CaseRecord,
    HttpMetrics,
    HttpRequest,
    Latency,
    Metrics,
    ParityCheck,
    ParityRecord,
    PrefixCacheControl,
    RunRecord,
    ServerInfo,
    Summary,
    read_artifact,
)
from .servers import (
    ColdStartLaunch,
    ColdStartRecord,
    ConcurrencyTrial,
    SloRecord,
    SloStep,
)

# every version a reader accepts, oldest first, by kind (the CLI tells kinds apart by these)
RUN_SCHEMAS = (*OLDER, SCHEMA)
AB_SCHEMAS = (*AB_OLDER, AB_SCHEMA)
COMPILE_SCHEMAS = (*COMPILE_OLDER, COMPILE_SCHEMA)

KINDS = {SCHEMA: RunRecord, AB_SCHEMA: ABRecord, COMPILE_SCHEMA: CompileRecord,
         NIGHTLY_SCHEMA: NightlyIndex, SUMMARY_SCHEMA: NightSummary}


def schemas() -> dict[str, dict]:
    """Each kind's JSON Schema by schema name."""
    return {name: json_schema(model, name) for name, model in KINDS.items()}


__all__ = ["ABCase", "ABRecord", "AB_SCHEMA", "AB_SCHEMAS", "Artifact", "COMPARE_SCHEMA",
           "COMPILE_COMPARE_SCHEMA", "COMPILE_SCHEMA", "COMPILE_SCHEMAS", "EXPORT_SCHEMA",
           "HISTORY_SCHEMA", "RUN_SCHEMAS", "CaseCompile",
           "CaseLoad", "ColdStartLaunch", "ColdStartRecord", "ConcurrencyTrial", "SloRecord",
           "SloStep", "CaseHead", "CaseRecord", "Checkpoints", "CompileCase", "CompileRecord",
           "CompileTarget",
           "DeviceRef", "Devices", "ErrorInfo", "GitInfo", "Header", "HttpMetrics", "HttpRequest",
           "Invocation", "ItemRange", "KINDS", "NIGHTLY_SCHEMA", "NightSummary", "NightlyIndex",
           "SUMMARY_SCHEMA", "Latency", "LibTpu", "Metrics", "ModelRef",
           "PASSING", "ParityCheck", "ParityRecord", "PrefixCacheControl", "Provenance", "Record",
           "ReferenceFigure",
           "ReferenceSet", "RunRecord", "RunsRecord", "SCHEMA", "SCHEMA_FILE", "ServerInfo",
           "Sparse", "Summary", "TopologyRecord", "WorkloadRecord", "json_schema", "locked",
           "read_ab", "read_artifact", "read_compile_artifact", "read_json", "schema_file",
           "schemas", "write_artifact", "write_failed"]

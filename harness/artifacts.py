"""Every artifact kind mibench writes, and their JSON Schemas (shipped in
`harness/schemas/`, generated from the pydantic models: `python -m mibench.harness.artifacts`
rewrites them; a test checks the shipped files match the models)."""

from __future__ import annotations

import json

from mibench.harness.ab.record import AB_SCHEMA, ABRecord
from mibench.harness.records import SCHEMA, RunRecord, json_schema, schema_file
from mibench.harness.run.compile_records import COMPILE_SCHEMA, CompileRecord

KINDS = {SCHEMA: RunRecord, AB_SCHEMA: ABRecord, COMPILE_SCHEMA: CompileRecord}


def schemas() -> dict[str, dict]:
    """Each kind's JSON Schema by schema name."""
    return {name: json_schema(model, name) for name, model in KINDS.items()}


if __name__ == "__main__":
    for name, schema in schemas().items():
        schema_file(name).write_text(json.dumps(schema, indent=1) + "\n")
        print(f"wrote {schema_file(name)}")

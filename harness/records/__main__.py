"""`python -m mibench.harness.records`: rewrite the shipped JSON Schema of every artifact
kind from its pydantic model (a test checks the shipped files match the models)."""

from __future__ import annotations

import json

from . import schema_file, schemas

if __name__ == "__main__":
    for name, schema in schemas().items():
        schema_file(name).write_text(json.dumps(schema, indent=1) + "\n")
        print(f"wrote {schema_file(name)}")

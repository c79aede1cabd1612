"""Every versioned JSON schema name (`mibench.KIND/N`) is a constant of harness/records/: the
artifacts' beside their records, the other JSON outputs' in records/outputs.py. Code
elsewhere imports them, so a version is bumped in one place."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_NAME = re.compile(r"^mibench\.[a-z-]+/\d+$")


def schema_literals(source: str) -> list[str]:
    """Schema names written as string literals in code (docstrings left out)."""
    tree = ast.parse(source)
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef
                          | ast.ClassDef)
            and node.body and isinstance(node.body[0], ast.Expr)}
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and SCHEMA_NAME.match(node.value) and id(node) not in docs]


def test_schema_names_live_in_records():
    found = {}
    for top in ("harness", "engines", "workloads", "mibench"):
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("harness", "records"):
                continue
            if names := schema_literals(path.read_text()):
                found[str(rel)] = names
    assert found == {}


def test_the_outputs_names_are_the_records_constants():
    from mibench.harness import records

    assert (records.COMPARE_SCHEMA, records.HISTORY_SCHEMA, records.EXPORT_SCHEMA,
            records.COMPILE_COMPARE_SCHEMA) == ("mibench.compare/3", "mibench.history/2",
                                                "mibench.export/2", "mibench.compile-compare/1")
    # the kinds the CLI tells apart: every version its reader reads, the newest last
    from mibench.harness.records.ab import AB_OLDER
    from mibench.harness.records.compile import COMPILE_OLDER
    from mibench.harness.records.run import OLDER

    assert records.RUN_SCHEMAS == (*OLDER, records.SCHEMA)
    assert records.AB_SCHEMAS == (*AB_OLDER, records.AB_SCHEMA)
    assert records.COMPILE_SCHEMAS == (*COMPILE_OLDER, records.COMPILE_SCHEMA)


def test_the_check_can_fail():
    """Control: a constant, a tuple member and a dict value are caught; a docstring is not."""
    assert schema_literals('SCHEMA = "mibench.export/2"') == ["mibench.export/2"]
    assert schema_literals('K = ("mibench.ab/1", "x")\nd = {"schema": "mibench.history/2"}')
    assert schema_literals('def f():\n    """Writes `mibench.export/2`."""\n') == []

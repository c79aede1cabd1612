"""Import boundaries, read from the source (ast), so a lazy import inside a function counts:
engines never import the harness, and the workloads modules import no one in a loop."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(source: str, package: str) -> set[str]:
    """Absolute names of every module `source` imports (relative imports resolved against
    `package`, e.g. `mibench.engines.modes`), at any depth of the file."""
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{alias.name}" for alias in node.names}
    return out


def modules(folder: str) -> dict[str, set[str]]:
    """Module name under `mibench` -> what it imports, for every .py file of the folder."""
    out = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(("mibench",) + (rel[:-1] if rel[-1] == "__init__" else rel))
        package = name if rel[-1] == "__init__" else name.rpartition(".")[0]
        out[name] = imported_modules(path.read_text(), package)
    return out


def reaches_harness(imports: set[str]) -> set[str]:
    return {m for m in imports if m.split(".")[0] == "harness"
            or m == "mibench.harness" or m.startswith("mibench.harness.")}


def test_engines_never_import_the_harness():
    found = modules("engines")
    assert len(found) > 20 and "mibench.engines.modes.compiles" in found  # the walk sees all
    offenders = {name: sorted(reaches_harness(imps)) for name, imps in found.items()
                 if reaches_harness(imps)}
    assert offenders == {}


def test_the_harness_check_can_fail():
    """Control: each spelling of an import of the harness is caught."""
    for source in ("from mibench.harness.run.memory import PeakRss",
                   "def f():\n    import mibench.harness",
                   "from mibench import harness", "import harness.memory",
                   "from ...harness import memory"):
        assert reaches_harness(imported_modules(source, "mibench.engines.modes")), source
    assert not reaches_harness(imported_modules("from mibench.engines import x\nimport os",
                                                "mibench.engines"))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle among the graph's modules, or None."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(node, path):
        state[node] = 1
        for nxt in sorted(graph[node] & graph.keys()):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt, path + [nxt])):
                return found
        state[node] = 2
        return None

    for start in graph:
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_workloads_modules_import_no_loop():
    graph = {name: imps - {name} for name, imps in modules("workloads").items()
             if name != "mibench.workloads"}  # the package re-exports; its modules must not loop
    assert "mibench.workloads.generate" in graph and "mibench.workloads.jsonl" in graph
    assert _cycle(graph) is None, _cycle(graph)
    # control: the old loop, generate <-> jsonl, is found
    looped = {**graph, "mibench.workloads.jsonl": {"mibench.workloads.generate"}}
    assert _cycle(looped) is not None


def test_every_engine_keeps_the_contract(jax_tiny, torch_tiny):
    """The jax, torch and fake engines all answer what the harness may ask (engines/contract.py)."""
    from mibench.engines.contract import Engine
    from mibench.harness.testing import FakeEngine

    for engine in (jax_tiny, torch_tiny, FakeEngine()):
        assert isinstance(engine, Engine), type(engine).__name__
        assert engine.model_config.vocab_size == 151936
        assert isinstance(engine.special_ids, frozenset) and isinstance(engine.topology, dict)
        assert set(engine.modes) >= {"single"}
        assert isinstance(engine.resolved_options("single", {}), dict)
    assert 151643 in jax_tiny.special_ids and jax_tiny.special_ids == torch_tiny.special_ids
    assert jax_tiny.encode("ab") == torch_tiny.encode("ab") == [97, 98]  # byte-level
    assert jax_tiny.resolved_options("prefill_extend", {}) == {"attention": "xla"}
    assert torch_tiny.resolved_options("prefill_extend", {}) == {"attention": "sdpa"}


def test_mibench_imports_from_outside_the_checkout(tmp_path):
    """The packages install under the mibench namespace; nothing generic lands on the path."""
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-c", "import mibench, mibench.engines, "
                         "mibench.harness, mibench.workloads"], cwd=tmp_path)
    assert ok.returncode == 0
    for generic in ("engines", "harness", "workloads"):
        bad = subprocess.run([sys.executable, "-c", f"import {generic}"], cwd=tmp_path,
                             capture_output=True)
        assert bad.returncode != 0, f"`import {generic}` works outside the checkout"

"""Import boundaries, read from the source (ast), so a lazy import inside a function counts:
engines never import the harness, the harness and workloads reach the engines only through
`mibench.engines` itself (its public surface), and no module imports another in a loop."""

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
        rel = rel[1:] if rel[0] == "mibench" else rel  # mibench/ is the namespace itself
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
    for source in ("from mibench.harness.host.memory import PeakRss",
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


def package_graph() -> dict[str, set[str]]:
    """Every mibench module -> the mibench modules it imports, leaving out imports of its own
    enclosing packages (a module reaching a sibling through its package's `__init__`)."""
    found = {}
    for folder in ("mibench", "engines", "harness", "workloads"):
        found |= modules(folder)
    return {name: {m for m in imps if m in found and m != name
                   and not name.startswith(m + ".")} for name, imps in found.items()}


def test_no_module_imports_in_a_loop():
    graph = package_graph()
    assert {"mibench.errors", "mibench.harness.config.spec", "mibench.workloads.jsonl",
            "mibench.engines.modes.registry"} <= graph.keys()
    assert _cycle(graph) is None, _cycle(graph)
    # controls: the old loops, config <-> matrix and generate <-> jsonl, are found
    for a, b in (("mibench.harness.config.spec", "mibench.harness.config.matrix"),
                 ("mibench.workloads.generate", "mibench.workloads.jsonl")):
        looped = {**graph, a: graph[a] | {b}, b: graph[b] | {a}}
        assert _cycle(looped) is not None


def engine_internals(imports: set[str]) -> set[str]:
    """The modules under mibench.engines that `imports` names (names imported from the
    package itself, `from mibench.engines import load_engine`, are its public surface)."""
    out = set()
    for name in imports:
        if name.startswith("mibench.engines."):
            rel = Path(*name.split(".")[2:])
            if (ROOT / "engines" / rel).with_suffix(".py").exists() or (
                    ROOT / "engines" / rel).is_dir():
                out.add(name)
    return out


def test_harness_and_workloads_use_only_the_engines_public_surface():
    found = modules("harness") | modules("workloads")
    assert len(found) > 40 and "mibench.harness.run.runner" in found  # the walk sees all
    offenders = {name: sorted(engine_internals(imps)) for name, imps in found.items()
                 if engine_internals(imps)}
    assert offenders == {}
    # control: each spelling of an internal import is caught, a public name is not
    for source in ("from mibench.engines.modes.registry import MODES",
                   "def f():\n    import mibench.engines.jax_engine",
                   "from mibench.engines import config"):
        assert engine_internals(imported_modules(source, "mibench.harness")), source
    assert not engine_internals(imported_modules("from mibench.engines import load_engine, "
                                                 "MODES", "mibench.harness"))


def test_every_engine_keeps_the_contract(jax_tiny, torch_tiny):
    """The jax, torch and fake engines all answer what the harness may ask (engines/contract.py)."""
    from mibench.engines import MODES, Engine
    from mibench.harness.testing import FakeEngine

    for engine in (jax_tiny, torch_tiny, FakeEngine()):
        assert isinstance(engine, Engine), type(engine).__name__
        assert engine.model_config.vocab_size == 151936
        assert isinstance(engine.special_ids, frozenset) and isinstance(engine.topology, dict)
        assert set(engine.modes) >= {"single"}
        assert isinstance(engine.resolved_options("single", {}), dict)
        assert engine.modes == tuple(MODES[engine.name])  # the registry's modes, no other
    assert 151643 in jax_tiny.special_ids and jax_tiny.special_ids == torch_tiny.special_ids
    assert jax_tiny.encode("ab") == torch_tiny.encode("ab") == [97, 98]  # byte-level
    assert jax_tiny.resolved_options("prefill_extend", {}) == {"attention": "xla"}
    assert torch_tiny.resolved_options("prefill_extend", {}) == {"attention": "sdpa"}
    assert all(callable(m._scorer()) for m in MODES["jax"].values())  # each mode scores


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


def test_every_package_folder_is_installed():
    """pyproject's package list names every folder with an __init__.py (a non-editable
    install leaves out the rest)."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"mibench"}
    for top in ("engines", "harness", "workloads"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT).parts
            found.add(".".join(("mibench",) + rel))
    assert found == listed


# the harness's own layers, lowest first: a module imports only its own layer and those
# below it (a lazy import inside a function counts), so the folders show the flow; the wing
# (under_test) above every core layer it uses, jobs included (its jobs add to theirs)
HARNESS_LAYERS = ("util", "stats", "verdicts", "case_kinds", "records", "judge", "host",
                  "config", "compile", "run", "serve", "report", "ab", "nightly", "jobs",
                  "under_test", "testing", "commands", "cli")


def harness_layer(module: str) -> int | None:
    """The layer index of a `mibench.harness...` module (None: not the harness's)."""
    parts = module.split(".")
    if parts[:2] != ["mibench", "harness"]:
        return None
    if len(parts) == 2:
        return -1  # the package itself
    return HARNESS_LAYERS.index(parts[2]) if parts[2] in HARNESS_LAYERS else len(HARNESS_LAYERS)


def upward_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Module -> the harness modules it imports from a higher layer."""
    out = {}
    for name, imports in graph.items():
        mine = harness_layer(name)
        if mine is None:
            continue
        up = sorted(m for m in imports if (harness_layer(m) or -1) > mine)
        if up:
            out[name] = up
    return out




def test_harness_packages_import_only_layers_below():
    graph = modules("harness")
    layers = {harness_layer(name) for name in graph}
    assert len(HARNESS_LAYERS) not in layers, "a harness module outside HARNESS_LAYERS: " + \
        str(sorted(n for n in graph if harness_layer(n) == len(HARNESS_LAYERS)))
    assert upward_imports(graph) == {}
    # control: the old back-edges are found
    for a, b in (("mibench.harness.report.repro", "mibench.harness.cli"),
                 ("mibench.harness.judge.history", "mibench.harness.host.provenance"),
                 ("mibench.harness.compile.runner", "mibench.harness.commands.common")):
        assert upward_imports({a: {b}}) == {a: [b]}


def impure_imports(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Module of harness/stats/ -> what it imports of mibench outside harness/stats/ (the
    records, the config, the reports, the judgement, the verdict words, the engines...)."""
    out = {}
    for name, imports in graph.items():
        if name != "mibench.harness.stats" and not name.startswith("mibench.harness.stats."):
            continue
        bad = sorted(m for m in imports if m.split(".")[0] in ("mibench", "harness")
                     and m != "mibench.harness.stats"
                     and not m.startswith("mibench.harness.stats."))
        if bad:
            out[name] = bad
    return out


def test_stats_holds_maths_only():
    """harness/stats/ is pure functions on numbers: it imports nothing of mibench but itself
    (numpy and scipy are fine; records, config, report, judge and verdicts are not)."""
    graph = modules("harness")
    assert {"mibench.harness.stats.significance", "mibench.harness.stats.changepoint"} <= \
        graph.keys()  # the walk sees stats/
    impure = impure_imports(graph)
    assert impure == {}
    # control: each spelling of a reach out of stats/ is caught, maths imports are not
    for source in ("from ..records import CaseRecord", "from ..verdicts import REGRESSION",
                   "def f():\n    from ..judge.busy import busy",
                   "from mibench.harness.config.spec import Config",
                   "from ..report import fmt", "import mibench.harness.records",
                   "from mibench.errors import MibenchError"):
        found = impure_imports({"mibench.harness.stats.x": imported_modules(
            source, "mibench.harness.stats")})
        assert found, source
    assert not impure_imports({"mibench.harness.stats.x": imported_modules(
        "import math\nfrom scipy.stats import t\nfrom .describe import rates\n"
        "from . import changepoint", "mibench.harness.stats")})
# the servers-under-test wing (harness/under_test/): it imports the core, never the reverse;
# the one registration point plugs its case kind in, by a lazy "module:attribute" entry (the
# wing's developer jobs, harness/under_test/jobs/, come with its kind: `kind_job`)
WING = "mibench.harness.under_test"
REGISTRATION = "mibench.harness.case_kinds"


def wing_references(source: str, package: str) -> set[str]:
    """The wing's modules that `source` imports, and the lazy "module:attribute" entries of
    the wing that it names (a registry entry is an import deferred)."""
    found = {m for m in imported_modules(source, package) if m == WING or m.startswith(WING + ".")}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                node.value.startswith(WING) and ":" in node.value:
            found.add(node.value)
    return found


def reaching_the_wing() -> dict[str, set[str]]:
    """Every module outside the wing -> what of the wing it reaches."""
    out = {}
    for folder in ("mibench", "engines", "harness", "workloads"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("").parts
            rel = rel[1:] if rel[0] == "mibench" else rel
            name = ".".join(("mibench",) + (rel[:-1] if rel[-1] == "__init__" else rel))
            package = name if rel[-1] == "__init__" else name.rpartition(".")[0]
            if name != WING and not name.startswith(WING + "."):
                if found := wing_references(path.read_text(), package):
                    out[name] = found
    return out


def test_only_the_registration_point_plugs_the_wing_in():
    reaching = reaching_the_wing()
    assert REGISTRATION in reaching  # the walk sees the registration's lazy entry
    assert set(reaching) == {REGISTRATION}, reaching
    assert all(":" in m for m in reaching[REGISTRATION])  # lazily: no import at all
    # control: each spelling of a core module reaching the wing is caught
    for source in ("from mibench.harness.under_test.pool import ServerPool",
                   "def f():\n    from ..under_test import launch",
                   "from .. import under_test",
                   'KINDS.add("http", "mibench.harness.under_test.requests_case:X")'):
        assert wing_references(source, "mibench.harness.run"), source
    assert not wing_references("from ..case_kinds import kind_of\nx = 'under_test'",
                               "mibench.harness.run")

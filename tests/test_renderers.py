"""Every renderer has one of two shapes, in one registry (harness/report/renderers.py):
each entry is a function of harness/report/ taking the computed record first and options by
keyword with defaults; a text renderer returns the text, a file renderer takes `out: Path`
second and returns what it wrote. The exporters are reachable there too (`export-<format>`).
No JAX: every entry is imported, none is run."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest

from mibench.errors import MibenchError
from mibench.harness.report.exporters import EXPORTERS
from mibench.harness.report.renderers import EXPORT, RENDERERS
from mibench.registry import Registry

EMPTY = inspect.Parameter.empty


def _is(annotation, name: str) -> bool:
    return annotation == name or getattr(annotation, "__name__", None) == name


def shape(fn) -> str:
    """`files` (its second parameter is `out`) or `text`."""
    params = list(inspect.signature(fn).parameters)
    return "files" if params[1:2] == ["out"] else "text"


def misshapen(registry) -> dict[str, str]:
    """Name -> why its entry is not a renderer of harness/report/ of either shape."""
    out = {}
    for name in registry:
        fn = registry[name]
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        files = shape(fn) == "files"
        needed = params[:2 if files else 1]
        if not fn.__module__.startswith("mibench.harness.report"):
            out[name] = f"lives in {fn.__module__}"
        elif not needed or any(p.default is not EMPTY for p in needed):
            out[name] = "takes no record first"
        elif any(p.default is EMPTY for p in params[len(needed):]):
            out[name] = "an option without a default"
        elif files and not _is(params[1].annotation, "Path"):
            out[name] = "its out is not a Path"
        elif files == _is(sig.return_annotation, "str") or sig.return_annotation is EMPTY:
            out[name] = "a file renderer returning text" if files else "returns no text"
    return out


def test_every_renderer_resolves_in_report_with_one_of_two_shapes():
    assert misshapen(RENDERERS) == {}
    assert {n for n in RENDERERS if shape(RENDERERS[n]) == "files"} == {
        "report-plots", "history-plots", "site"}
    assert {"report", "compare", "history", "ab", "compile-fit"} <= set(RENDERERS)
    # control: a function of the judgement, one needing a second argument that is not
    # `out`, one returning rows and not text, are each flagged
    odd = Registry("renderer")
    odd.add("judged", "mibench.harness.judge.compile_compare:relative_change")
    odd.add("two-records", "mibench.harness.report.figures:comparison_plot")
    odd.add("rows", "mibench.harness.report.tables:rows_of")
    assert misshapen(odd) == {"judged": "lives in mibench.harness.judge.compile_compare",
                              "two-records": "an option without a default",
                              "rows": "returns no text"}


def test_every_exporter_is_a_text_renderer_of_the_same_registry():
    exported = {n.removeprefix(EXPORT): RENDERERS[n] for n in RENDERERS if n.startswith(EXPORT)}
    assert exported == {name: module.export for name, module in EXPORTERS.items()}
    assert {shape(fn) for fn in exported.values()} == {"text"}


def test_an_unknown_renderer_names_the_known_ones():
    with pytest.raises(MibenchError, match=r"unknown renderer 'histroy' \(known: report, "
                                           r".*export-csv.*\); did you mean 'history'"):
        RENDERERS.lookup("histroy")


def private_imports_of_report(root=None) -> list[str]:
    """`file: name` for each private name (`_x`) of a module of harness/report/ that
    another module imports: the plot helpers others draw with are public."""
    import ast

    root = root or Path(__file__).resolve().parents[1]
    found = []
    for path in sorted((root / "harness").rglob("*.py")):
        package = path.relative_to(root).parent.parts
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = package[:len(package) - node.level + 1] if node.level else ()
            target = (*base, *(node.module or "").split("."))
            if target[:1] == ("mibench",):
                target = target[1:]
            if target[:2] != ("harness", "report"):
                continue
            found += [f"{path.relative_to(root)}: {a.name}" for a in node.names
                      if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_no_module_imports_a_private_name_of_report():
    assert private_imports_of_report() == []


GOLDEN = Path(__file__).resolve().parent / "data" / "golden"


@pytest.mark.parametrize("args, name", [
    (["compare", "BASE", "NEW", "--format", "json"], "compare-json"),
    (["compare", "BASE", "NEW"], "compare"),
    (["history", "DIR", "--format", "json"], "history-json"),
    (["history", "DIR"], "history"),
])
def test_the_commands_render_through_the_registry(args, name, tmp_path):
    """A command asks RENDERERS for its output (an entry swapped, the output follows), so
    a renderer is found in one place."""
    from typer.testing import CliRunner

    from mibench.harness.cli import app

    for side in ("base", "new"):
        shutil.copy(GOLDEN / f"run-{side}.json", tmp_path / f"run-{side}.json")
    where = {"BASE": tmp_path / "run-base.json", "NEW": tmp_path / "run-new.json",
             "DIR": tmp_path}
    with RENDERERS.entry(name, lambda record, *options: f"rendered by {name}\n"):
        got = CliRunner().invoke(app, [str(where.get(a, a)) for a in args])
    assert got.stdout == f"rendered by {name}\n", got.output

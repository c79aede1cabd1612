"""The Markdown renderers have one shape, in one registry (harness/report/renderers.py): each
entry is a function of harness/report/ taking the computed record first, options by keyword
with defaults, and returning the page as text."""

from __future__ import annotations

import inspect

import pytest

from mibench.errors import MibenchError
from mibench.harness.report.renderers import RENDERERS
from mibench.registry import Registry


def misshapen(registry) -> dict[str, str]:
    """Name -> why its entry is not a renderer of harness/report/ of the one shape."""
    out = {}
    for name in registry:
        fn = registry[name]
        params = list(inspect.signature(fn).parameters.values())
        if not fn.__module__.startswith("mibench.harness.report"):
            out[name] = f"lives in {fn.__module__}"
        elif not params or params[0].default is not inspect.Parameter.empty:
            out[name] = "takes no record first"
        elif any(p.default is inspect.Parameter.empty for p in params[1:]):
            out[name] = "an option without a default"
    return out


def test_every_renderer_lives_in_report_with_one_shape():
    assert set(RENDERERS) == {"report", "compare", "history", "compile-compare"}
    assert misshapen(RENDERERS) == {}
    # control: a function of the judgement, and one needing a second argument, are flagged
    odd = Registry("renderer")
    odd.add("judged", "mibench.harness.judge.compile_compare:relative_change")
    odd.add("bare", "mibench.harness.report:draw_plots")
    assert set(misshapen(odd)) == {"judged", "bare"}


def test_an_unknown_renderer_names_the_known_ones():
    with pytest.raises(MibenchError, match="unknown renderer 'histroy'.*did you mean"):
        RENDERERS.lookup("histroy")


def private_imports_of_report(root=None) -> list[str]:
    """`file: name` for each private name (`_x`) of a module of harness/report/ that
    another module imports: the plot helpers others draw with are public."""
    import ast
    from pathlib import Path

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

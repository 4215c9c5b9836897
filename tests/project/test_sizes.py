"""The sizes the redesign (issue 35) brought the code to, held: no module of handoff/ over 500
lines, no function over 60, and the Orchestrator at most 500 lines and 25 methods. A module or
function that grows past them is split by its jobs, not let grow."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

PACKAGE = ROOT / "handoff"
MODULE_LINES, FUNCTION_LINES = 500, 60
ORCHESTRATOR_LINES, ORCHESTRATOR_METHODS = 500, 25


def too_long(root: Path) -> tuple[list[str], list[str]]:
    """(modules over MODULE_LINES, functions over FUNCTION_LINES) under root."""
    modules, functions = [], []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MODULE_LINES:
            modules.append(f"{path.relative_to(root)}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    functions.append(f"{path.relative_to(root)}:{node.lineno} {node.name}: "
                                     f"{length} lines")
    return modules, functions


def test_no_module_over_500_lines_and_no_function_over_60() -> None:
    modules, functions = too_long(PACKAGE)

    assert modules == [], "split these modules by their jobs:\n" + "\n".join(modules)
    assert functions == [], "split these functions:\n" + "\n".join(functions)


def test_the_orchestrator_keeps_to_its_stages() -> None:
    source = (PACKAGE / "loop" / "orchestrator.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    [orchestrator] = [node for node in tree.body
                      if isinstance(node, ast.ClassDef) and node.name == "Orchestrator"]
    methods = [node.name for node in orchestrator.body
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]

    assert len(source.splitlines()) <= ORCHESTRATOR_LINES
    assert len(methods) <= ORCHESTRATOR_METHODS, methods


def test_the_check_sees_a_long_module_and_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "long.py").write_text("x = 1\n" * (MODULE_LINES + 1), encoding="utf-8")
    body = "".join(f"    y{n} = {n}\n" for n in range(FUNCTION_LINES))
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "fn.py").write_text(f"def grown() -> None:\n{body}", encoding="utf-8")
    (tmp_path / "fits.py").write_text(f"def fits() -> None:\n{body[:-len('    y59 = 59')-1]}",
                                      encoding="utf-8")

    modules, functions = too_long(tmp_path)

    assert modules == [f"long.py: {MODULE_LINES + 1} lines"]
    assert functions == [f"deep/fn.py:1 grown: {FUNCTION_LINES + 1} lines"]

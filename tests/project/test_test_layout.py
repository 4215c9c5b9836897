"""The tests mirror the modules: every module of handoff/ has its test file, in the unit layer
(no process started: tests/unit/conftest.py) or the integration layer beside it, and every test
file there is named after a module that exists (a file whose module was renamed or removed is
seen, not left behind). tests/unit/test_no_process.py tests the unit layer's own rule."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT, TESTS

PACKAGE = ROOT / "handoff"
LAYERS = ("unit", "integration")
#: test files that test no module of their own name: the unit layer's rule, and the pinned
#: libtmux release that machinery/tmux.py drives (its seams, checked against its source)
OWN = {TESTS / "unit" / "test_no_process.py",
       *(TESTS / layer / "machinery" / "test_tmux_stack.py" for layer in LAYERS)}


def mirrored(module: Path) -> Path:
    """Where a module's tests live under a layer: handoff/loop/rules.py → loop/test_rules.py;
    a module at the top of the package → base/test_<name>.py; a package's own code (its
    __init__) → test_<package>.py in its folder (operations/gc/test_gc.py)."""
    rel = module.relative_to(PACKAGE)
    if module.name == "__init__.py":
        return rel.parent / f"test_{rel.parent.name}.py"
    folder = Path(*rel.parts[:-1]) if len(rel.parts) > 1 else Path("base")
    return folder / f"test_{module.stem}.py"


def has_code(init: Path) -> bool:
    """A package's __init__ that defines a function or a class (not only re-exports)."""
    return any(isinstance(node, (ast.FunctionDef, ast.ClassDef))
               for node in ast.parse(init.read_text(encoding="utf-8")).body)


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py" or has_code(p))


def test_every_module_has_a_test_file_in_a_layer() -> None:
    missing = [str(m.relative_to(ROOT)) for m in modules()
               if not any((TESTS / layer / mirrored(m)).exists() for layer in LAYERS)]
    assert missing == [], f"write tests/unit/<layer>/test_<module>.py for: {missing}"


def test_every_test_file_of_a_layer_is_named_after_a_module() -> None:
    expected = {mirrored(m) for m in modules()}
    orphans = [str(p.relative_to(ROOT)) for layer in LAYERS
               for p in sorted((TESTS / layer).rglob("test_*.py"))
               if p not in OWN and p.relative_to(TESTS / layer) not in expected]
    assert orphans == [], f"rename these after the module they test: {orphans}"


def test_the_mirror_of_a_top_module_and_a_nested_one() -> None:
    assert mirrored(PACKAGE / "errors.py") == Path("base/test_errors.py")
    assert mirrored(PACKAGE / "operations" / "gc" / "found.py") == \
        Path("operations/gc/test_found.py")
    assert mirrored(PACKAGE / "operations" / "gc" / "__init__.py") == \
        Path("operations/gc/test_gc.py")

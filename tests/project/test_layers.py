"""The folders of handoff/ are layers, and every import points down (docs/architecture.md):
a module never imports one from a layer above its own, at module level or inside a function;
and no modules import each other in a circle, however deep the import sits (a function-level
import only hides a circle from Python, not from a reader)."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from tests.paths import ROOT

#: top to bottom, as docs/architecture.md draws them
LAYERS = ("cli", "peer", "trackers", "operations", "loop", "machinery", "config", "providers",
          "protocol", "record", "base")
#: the modules at the top of the package, each in the layer it serves
TOP = {"errors": "base", "inputs": "base", "role": "base", "phases": "base",
       "next_steps": "base", "verdicts": "base", "processes": "base", "platforms": "base", "build": "base",
       "trace": "base", "signs": "base",
       "__init__": "base", "__main__": "cli"}


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside handoff ("handoff.loop.gate" → "loop")."""
    part = module.split(".")[1] if "." in module else "__init__"
    if part in TOP:
        return TOP[part]
    assert part in LAYERS or part in ("roles", "hooks"), f"{module} is in no layer"
    return part if part in LAYERS else "base"


def imports(path: Path, root: Path = ROOT, typing: bool = True) -> list[tuple[int, str]]:
    """(line, dotted module) of every handoff module the file imports, wherever the import
    sits; typing: also those under `if TYPE_CHECKING:` (which run only for mypy)."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set() if typing else {id(n) for block in ast.walk(tree)
                                    if isinstance(block, ast.If) and _type_checking(block.test)
                                    for inner in block.body for n in ast.walk(inner)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("handoff"):
            # `from handoff.loop import gate` imports handoff.loop.gate (the package's own
            # __init__ ran already, as for any submodule: no edge to it of its own), and
            # `from handoff import config` the package handoff.config
            folder = root / node.module.replace(".", "/")
            modules = [f"{node.module}.{a.name}" for a in node.names
                       if (folder / f"{a.name}.py").exists()
                       or (folder / a.name / "__init__.py").exists()]
            found += [(node.lineno, m) for m in modules]
            if len(modules) < len(node.names):
                found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("handoff.")]
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def upward(root: Path) -> list[str]:
    """Every import in root/handoff that points up a layer."""
    found = []
    for path in sorted((root / "handoff").rglob("*.py")):
        here = layer_of(module_name(path, root))
        for line, target in imports(path, root):
            if target in ("handoff",) or _docstring_only(target, root):
                continue  # a layer's package that is its docstring alone
            there = layer_of(target)
            if LAYERS.index(there) < LAYERS.index(here):
                found.append(f"{path.relative_to(root)}:{line} ({here}) imports {target} ({there})")
    return found


def _docstring_only(target: str, root: Path) -> bool:
    """A layer's package whose __init__ imports no module of handoff (handoff.config's and
    handoff.providers' do: an import of either is an import of their modules)."""
    init = root / target.replace(".", "/") / "__init__.py"
    return (target.count(".") == 1 and target.split(".")[1] in LAYERS and init.exists()
            and not imports(init, root))


def circles(root: Path) -> list[list[str]]:
    """The sets of modules of root/handoff that import each other in a circle (Tarjan's
    strongly connected components of more than one module), imports for mypy alone left out."""
    paths = {}
    for path in (root / "handoff").rglob("*.py"):
        name = module_name(path, root)
        paths[name.removesuffix(".__init__")] = path
    graph = {name: sorted({t for _, t in imports(path, root, typing=False)
                           if t in paths and t != name}) for name, path in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(name: str) -> None:
        index[name] = low[name] = len(index)
        stack.append(name)
        for other in graph[name]:
            if other not in index:
                visit(other)
                low[name] = min(low[name], low[other])
            elif other in stack:
                low[name] = min(low[name], index[other])
        if low[name] == index[name]:
            part = []
            while True:
                other = stack.pop()
                part.append(other)
                if other == name:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_every_import_points_down() -> None:
    assert len(list((ROOT / "handoff").rglob("*.py"))) > 40
    found = upward(ROOT)
    assert not found, "imports pointing up a layer:\n" + "\n".join(found)


def test_no_modules_import_each_other_in_a_circle() -> None:
    found = circles(ROOT)
    assert not found, "modules in a circle:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_a_planted_function_level_import_is_seen(tmp_path: Path) -> None:
    """The checks fail on what they are for: an upward import and a circle, each hidden in a
    function body, in a copy of the package."""
    shutil.copytree(ROOT / "handoff", tmp_path / "handoff",
                    ignore=shutil.ignore_patterns("__pycache__"))
    assert upward(tmp_path) == [] and circles(tmp_path) == []
    gate = tmp_path / "handoff" / "loop" / "gate.py"
    kept = gate.read_text()
    gate.write_text(kept + "\n\ndef planted() -> None:\n"
                    "    from handoff.operations import closing  # noqa\n")
    assert any("loop/gate.py" in line and "handoff.operations.closing" in line
               for line in upward(tmp_path))
    gate.write_text(kept)
    merging = tmp_path / "handoff" / "operations" / "merging.py"
    merging.write_text(merging.read_text() + "\n\ndef planted() -> None:\n"
                       "    from handoff.operations import finish  # noqa\n")
    assert any({"handoff.operations.finish", "handoff.operations.merging"} <= set(circle)
               for circle in circles(tmp_path)), circles(tmp_path)


def test_every_folder_is_a_layer_the_architecture_names() -> None:
    folders = {p.name for p in (ROOT / "handoff").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS) - {"base"}
    drawn = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for folder in folders:
        assert f"\n{folder}/" in drawn, f"docs/architecture.md does not draw {folder}/"


def test_every_module_of_a_folder_is_in_the_folders_layer() -> None:
    """handoff.config.keys is config's as handoff.config is, however deep a module sits."""
    found = {module_name(p): layer_of(module_name(p)) for p in (ROOT / "handoff").rglob("*.py")
             if len(p.relative_to(ROOT / "handoff").parts) > 1}
    config = {m for m, layer in found.items() if m.startswith("handoff.config.")}
    assert len(config) >= 6 and {found[m] for m in config} == {"config"}
    assert all(layer == m.split(".")[1] for m, layer in found.items()), found


def test_an_import_of_a_package_that_imports_its_modules_is_checked(tmp_path: Path) -> None:
    """`from handoff.config import Config` and `from handoff import config` import
    handoff.config's modules: from a layer below, either points up (a package that is its
    docstring alone imports nothing)."""
    shutil.copytree(ROOT / "handoff", tmp_path / "handoff",
                    ignore=shutil.ignore_patterns("__pycache__"))
    store = tmp_path / "handoff" / "record" / "store.py"
    kept = store.read_text()
    for planted in ("from handoff.config import Config", "from handoff import config"):
        store.write_text(kept + f"\n\ndef planted() -> None:\n    {planted}  # noqa\n")
        assert any("record/store.py" in line and "imports handoff.config (config)" in line
                   for line in upward(tmp_path)), planted
    store.write_text(kept + "\n\ndef planted() -> None:\n    from handoff import loop  # noqa\n")
    assert upward(tmp_path) == []

"""The folders of handoff/ are layers, and every import points down (docs/architecture.md):
a module never imports one from a layer above its own, at module level or inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: top to bottom, as docs/architecture.md draws them
LAYERS = ("cli", "peer", "operations", "loop", "machinery", "config", "providers", "protocol", "record",
          "base")
#: the modules at the top of the package, each in the layer it serves
TOP = {"config": "config", "errors": "base", "inputs": "base", "role": "base", "phases": "base",
       "processes": "base", "platforms": "base", "build": "base",
       "trace": "base",
       "__init__": "base", "__main__": "cli"}


def layer_of(module: str) -> str:
    """The layer of a dotted module name inside handoff ("handoff.loop.gate" → "loop")."""
    part = module.split(".")[1] if "." in module else "__init__"
    if part in TOP:
        return TOP[part]
    assert part in LAYERS or part in ("roles", "hooks"), f"{module} is in no layer"
    return part if part in LAYERS else "base"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every handoff module the file imports."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("handoff"):
            found.append((node.lineno, node.module))
            # `from handoff.loop import gate` imports handoff.loop.gate
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names
                      if (ROOT / node.module.replace(".", "/") / f"{a.name}.py").exists()]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("handoff.")]
    return found


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_import_points_down() -> None:
    upward = []
    files = sorted((ROOT / "handoff").rglob("*.py"))
    assert len(files) > 40
    for path in files:
        here = layer_of(module_name(path))
        for line, target in imports(path):
            if target in ("handoff",) or (target.count(".") == 1 and target.split(".")[1] in LAYERS):
                continue  # a layer's package itself (its docstring)
            there = layer_of(target)
            if LAYERS.index(there) < LAYERS.index(here):
                upward.append(f"{path.relative_to(ROOT)}:{line} ({here}) imports {target} ({there})")
    assert not upward, "imports pointing up a layer:\n" + "\n".join(upward)


def test_every_folder_is_a_layer_the_architecture_names() -> None:
    folders = {p.name for p in (ROOT / "handoff").iterdir()
               if p.is_dir() and (p / "__init__.py").exists()}
    assert folders == set(LAYERS) - {"config", "base"}
    drawn = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    for folder in folders:
        assert f"\n{folder}/" in drawn, f"docs/architecture.md does not draw {folder}/"

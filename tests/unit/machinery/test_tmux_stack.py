"""libtmux runs tmux only through handoff's bounded runner.

The bound is installed at the pinned libtmux's one seam (the `tmux_cmd` name in each module that
calls it); these tests read the installed libtmux source so that an upgrade that runs tmux from
anywhere else fails here, and drive libtmux's own objects against a stopped and a fresh server.
"""

from __future__ import annotations

import ast
from pathlib import Path

import libtmux
import pytest

from handoff.machinery.tmux import SEAMS, BoundedCmd, Tmux
from tests.paths import ROOT

LIBTMUX = Path(libtmux.__file__).parent
HANDOFF = ROOT / "handoff"

#: module, enclosing function → what starts a process there, in the pinned libtmux 0.62
RUNS_TMUX = {
    ("libtmux.common", "_query_version", "tmux_cmd"),  # tmux -V, through the seam
    ("libtmux.neo", "fetch_objs", "tmux_cmd"),  # every object listing, through the seam
    ("libtmux.server", "cmd", "tmux_cmd"),  # every other command, through the seam
    ("libtmux.common", "__init__", "subprocess.Popen"),  # tmux_cmd itself: what the seam replaces
    ("libtmux.server", "raise_if_dead", "subprocess.check_call"),  # never called by handoff
    ("libtmux._internal.control_mode", "__enter__", "subprocess.Popen"),  # libtmux's test helper
}
#: what, from a module, starts a process
STARTERS = {"subprocess": {"Popen", "run", "call", "check_call", "check_output", "getoutput",
                           "getstatusoutput"},
            "os": {"system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp", "execv",
                   "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
                   "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe"},
            "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
            "pty": {"spawn", "fork"}}


def process_starts(module: str, source: str) -> set[tuple[str, str, str]]:
    """(module, enclosing function, callee) for each call in source that runs a process."""
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else function
            if isinstance(child, ast.Call):
                callee = child.func
                if isinstance(callee, ast.Name) and callee.id == "tmux_cmd":
                    found.add((module, function, "tmux_cmd"))
                if (isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name)
                        and callee.attr in STARTERS.get(callee.value.id, ())):
                    found.add((module, function, f"{callee.value.id}.{callee.attr}"))
            visit(child, inner)

    visit(ast.parse(source), "<module>")
    return found


def libtmux_process_starts() -> set[tuple[str, str, str]]:
    found: set[tuple[str, str, str]] = set()
    for path in sorted(LIBTMUX.rglob("*.py")):
        relative = path.relative_to(LIBTMUX.parent).with_suffix("")
        if "test" in relative.parts or relative.name == "pytest_plugin":
            continue  # libtmux's own tests and fixtures: never imported by handoff
        found |= process_starts(".".join(relative.parts), path.read_text(encoding="utf-8"))
    return found


def test_the_pinned_libtmux_runs_tmux_only_where_the_bounded_runner_is_installed() -> None:
    assert libtmux.__version__.startswith("0.62."), "re-read libtmux's call sites for a new minor"
    assert libtmux_process_starts() == RUNS_TMUX
    seams = {module for module, _, callee in RUNS_TMUX if callee == "tmux_cmd"}
    assert {module.__name__ for module in SEAMS} == seams
    for module in SEAMS:
        assert module.tmux_cmd is BoundedCmd, f"{module.__name__} runs tmux unbounded"


def test_the_call_site_check_sees_a_new_way_to_run_tmux() -> None:
    source = "import subprocess, os\ndef f():\n    subprocess.run(['tmux'])\n    os.system('x')\n"
    assert process_starts("m", source) == {("m", "f", "subprocess.run"), ("m", "f", "os.system")}
    assert process_starts("m", "from x import tmux_cmd\ntmux_cmd('-V')\n") == {
        ("m", "<module>", "tmux_cmd")}


def test_handoff_never_uses_the_unbounded_libtmux_paths() -> None:
    source = "\n".join(path.read_text(encoding="utf-8") for path in sorted(HANDOFF.rglob("*.py")))
    for unbounded in ("raise_if_dead", "control_mode", "ControlMode"):
        assert unbounded not in source


@pytest.fixture
def tmux(socket: str, handoff_home: Path) -> Tmux:
    return Tmux(socket, handoff_home)

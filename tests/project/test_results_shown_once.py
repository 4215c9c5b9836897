"""A typed result is rendered in one place: the command line and the board show an operation's
answer through `handoff.cli.output` (`show`, `line`), and no other module of handoff/cli reads a
result's lines itself. A new command that prints `result.said` by hand fails here."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

CLI = ROOT / "handoff" / "cli"
#: the renderer: the only reader of a result's lines in the command line and the board
RENDERER = "output.py"


def read_by_hand(source: str) -> list[int]:
    """The lines where code reads a result's `said` (its lines) or `notes` off it (not the
    renderer's own `output.notes`)."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Attribute) and node.attr in ("said", "notes")
                  and isinstance(node.ctx, ast.Load)
                  and not (isinstance(node.value, ast.Name) and node.value.id == "output"))


def test_only_the_renderer_reads_a_results_lines() -> None:
    found = {path.name: lines for path in sorted(CLI.glob("*.py"))
             if path.name != RENDERER and (lines := read_by_hand(path.read_text("utf-8")))}
    assert found == {}, f"render results with handoff.cli.output.show/line: {found}"


def test_the_check_sees_a_result_printed_by_hand(tmp_path: Path) -> None:
    planted = ("import typer\n\ndef stop(result):\n    typer.echo('\\n'.join(result.said))\n"
               "    for note in result.notes:\n        typer.echo(note)\n")
    assert read_by_hand(planted) == [4, 5]
    assert read_by_hand("def line(result):\n    said = 'x'\n    output.notes([said])\n") == []

"""The `handoff` command's first step: the lean lanes of `submit` and `status` (no typer, no
libtmux, no GitPython), the full command line for everything else, the same output either way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handoff.cli import app
from tests.harness import ADD_ONLY, FIX_ADD, handoff, plan_text, write_plan

HEAVY = ("typer", "click", "libtmux", "git", "yaml", "textual", "psutil", "watchdog",
         "handoff.cli.app")


def loaded_by(*args: str, cwd: Path) -> set[str]:
    """The modules `handoff ARGS` imports (run as the console script runs it)."""
    probe = ("import runpy, sys\n"
             f"sys.argv = ['handoff', *{list(args)!r}]\n"
             "try:\n    runpy.run_module('handoff', run_name='__main__')\n"
             "except SystemExit:\n    pass\n"
             "print('\\n'.join(sys.modules), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=cwd, capture_output=True,
                          text=True, timeout=60)
    return set(done.stderr.split())


@pytest.mark.parametrize(("args", "allowed"), [
    (("status",), ()), (("status", "--json"), ()),
    # a ticket named in a repository: GitPython finds the repository (no git process)
    (("status", "T-1", "--repo", "."), ("git",)),
    (("submit", "r.md", "--dir", "/nonexistent", "--role", "implementer"), ())])
def test_a_plain_submit_or_status_loads_nothing_heavy(args: tuple[str, ...],
                                                      allowed: tuple[str, ...],
                                                      repo: Path) -> None:
    modules = loaded_by(*args, cwd=repo)
    assert "handoff.cli.entry" in modules
    heavy = {m for m in modules for name in HEAVY if name not in allowed
             and (m == name or m.startswith(name + "."))}
    assert not heavy, f"a lean lane loaded the full command line: {sorted(heavy)[:5]}"


@pytest.mark.parametrize("args", [("status", "--help"), ("status", "--bogus"),
                                  ("submit", "--help"), ("doctor",)])
def test_anything_else_goes_to_the_full_command_line(args: tuple[str, ...], repo: Path) -> None:
    assert "handoff.cli.app" in loaded_by(*args, cwd=repo)


def test_the_lean_status_prints_what_the_full_command_does(
        repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    assert handoff("start", "T-1", "--plan", str(plan), "--yes", "--foreground",
                   cwd=repo).returncode == 0
    for args in (["status"], ["status", "T-1"], ["status", "--json"]):
        lean = handoff(*args, cwd=repo)
        assert app.main(args) == 0
        assert lean.returncode == 0 and lean.stdout == capsys.readouterr().out, args
    assert "T-1" in lean.stdout and "passed" in lean.stdout
    missing = handoff("status", "NO-SUCH", cwd=repo)
    assert missing.returncode == 3 and missing.stderr.startswith("handoff: error: no ticket")

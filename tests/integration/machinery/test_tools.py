"""handoff.machinery.tools: the installed git and tmux are found and judged against the minimum versions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from handoff.machinery import tools


def test_this_machines_git_and_tmux_are_recent_enough() -> None:
    for tool in ("git", "tmux"):
        have = tools.version(tool)
        assert have is not None and have >= tools.MINIMUM[tool], tool
    assert tools.problems() == []


def fake_tool(folder: Path, name: str, prints: str) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\necho '{prints}'\n", encoding="utf-8")
    script.chmod(0o755)


def test_a_missing_or_old_tool_is_named_with_the_version_needed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tool(tmp_path, "git", "git version 2.20.1")
    monkeypatch.setenv("PATH", str(tmp_path))
    found = tools.problems()
    assert "git 2.20 is too old (handoff needs 2.31 or newer)" in found
    assert "tmux is not installed (handoff needs tmux 3.0 or newer)" in found


def test_a_recent_tool_is_not_a_problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_tool(tmp_path, "git", "git version 2.45.0")
    fake_tool(tmp_path, "tmux", "tmux 3.4")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.path.dirname(shutil.which('sh') or '/bin/sh')}")
    assert tools.problems() == []


def test_a_version_is_asked_once_while_the_binary_is_the_same_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm process asks once for all its commands (handoff.cli.warm); an upgrade, a new
    file, is asked again."""
    asked = tmp_path / "asked"
    script = tmp_path / "git"

    def install(version: str) -> None:
        script.write_text(f"#!/bin/sh\necho x >> '{asked}'\necho 'git version {version}'\n",
                          encoding="utf-8")
        script.chmod(0o755)

    install("2.45.0")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.path.dirname(shutil.which('sh') or '/bin/sh')}")
    assert tools.version("git") == (2, 45)
    assert tools.version("git") == (2, 45)
    assert asked.read_text().count("x") == 1
    stamp = script.stat().st_mtime_ns
    install("2.20.1")
    os.utime(script, ns=(stamp + 10**9, stamp + 10**9))  # a second later, whatever the clock
    assert tools.version("git") == (2, 20)
    assert asked.read_text().count("x") == 2

"""Where the tests find the repository and their own files, wherever in tests/ a test sits."""

from __future__ import annotations

from pathlib import Path

#: the tests folder (tests/fixtures, tests/user-terminal.tmux.conf live here)
TESTS = Path(__file__).resolve().parent
#: the repository's top (handoff/, docs/, pyproject.toml)
ROOT = TESTS.parent

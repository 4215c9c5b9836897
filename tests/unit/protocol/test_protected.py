"""Which changed paths are control files (handoff.protocol.protected)."""

from __future__ import annotations

import pytest

from handoff.protocol.protected import CONTROL, DEFAULT, matches, touched
from tests.paths import ROOT

DOCS = ROOT / "docs" / "protocol.md"


@pytest.mark.parametrize(("pattern", "path", "expected"), [
    ("CLAUDE.md", "CLAUDE.md", True),
    ("CLAUDE.md", "pkg/sub/CLAUDE.md", True),
    ("CLAUDE.md", "CLAUDE.md.bak", False),
    (".claude/", ".claude/settings.json", True),
    (".claude/", "pkg/.claude/settings.json", False),
    (".claude/", ".claude", False),
    (".claude", "pkg/.claude/settings.json", True),
    (".claude", "pkg/claude/settings.json", False),
    (".github/workflows/", ".github/workflows/ci.yml", True),
    (".github/workflows/", ".github/CODEOWNERS", False),
    ("docs/api.md", "docs/api.md", True),
    ("docs/api.md", "docs/api.md.orig", False),
    ("docs/gen", "docs/gen/index.html", True),
    ("docs/*.md", "docs/intro.md", True),
    ("docs/*.md", "docs/deep/intro.md", False),
    ("./Makefile", "Makefile", True),
    (".handoff.yaml", ".handoff.yaml", True),
])
def test_a_pattern_matches_the_paths_it_names_and_no_others(pattern: str, path: str,
                                                             expected: bool) -> None:
    assert matches(pattern, path) is expected


def test_the_defaults_cover_what_steers_handoff_the_peers_and_ci() -> None:
    changed = ["calc.py", ".handoff.yaml", ".handoff/local-reviewer.md", "AGENTS.md",
               ".codex/config.toml", ".github/workflows/release.yml", "lib/CLAUDE.md",
               "README.md", ".gemini/settings.json"]
    assert touched(changed, DEFAULT) == sorted(set(changed) - {"calc.py", "README.md"})


def test_allowed_paths_and_the_configs_own_patterns() -> None:
    changed = ["CLAUDE.md", "AGENTS.md", "deploy/prod.tf"]
    assert touched(changed, (*DEFAULT, "deploy/"), allowed=["CLAUDE.md"]) == ["AGENTS.md",
                                                                             "deploy/prod.tf"]
    assert touched(changed, DEFAULT, allowed=["*.md"]) == []


def test_every_control_file_has_a_reason_and_is_in_the_protocol_docs() -> None:
    docs = DOCS.read_text(encoding="utf-8")
    section = docs[docs.index("### Control files"):docs.index("## Briefs")]
    assert all(why.strip() for _, why in CONTROL) and len(set(DEFAULT)) == len(DEFAULT)
    assert [p for p in DEFAULT if f"`{p}`" not in section] == []

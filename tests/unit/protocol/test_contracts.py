"""handoff.protocol.contracts: the role contract each peer works under, and the repo's own additions."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.protocol import contracts
from handoff.role import Kind


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_a_contract_is_the_role_the_shared_rules_and_nothing_else(tmp_path: Path,
                                                                   role: str) -> None:
    text = contracts.compose(tmp_path, role)
    assert text.startswith(f"# Your role: {role}")
    assert "# How we work (both roles)" in text
    other = "reviewer" if role == "implementer" else "implementer"
    assert f"# Your role: {other}" not in text
    for heading in ("## What you own", "## What you must not do", "## How you hand off"):
        assert heading in text


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_the_repos_own_addition_is_appended(tmp_path: Path, role: str) -> None:
    (tmp_path / ".handoff").mkdir()
    (tmp_path / ".handoff" / f"local-{role}.md").write_text("Use tabs. LOCAL-SENTINEL\n")
    text = contracts.compose(tmp_path, role)
    assert text.rstrip().endswith("Use tabs. LOCAL-SENTINEL")
    assert f"This repository's own rules for the {role}" in text


def test_an_oversized_addition_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / ".handoff").mkdir()
    big = tmp_path / ".handoff" / "local-implementer.md"
    big.write_text("x" * (contracts.LOCAL_LIMIT + 1))
    with pytest.raises(UsageError) as caught:
        contracts.compose(tmp_path, "implementer")
    assert str(big) in caught.value.message


@pytest.mark.parametrize("role", ["implementer", "reviewer"])
def test_no_contract_asks_for_rm_f(tmp_path: Path, role: str) -> None:
    """Codex's exec policy refuses `rm -f`/`rm -rf` even in bypass mode: asking for it would
    leave a Codex peer stuck on work it may not do."""
    for line in contracts.compose(tmp_path, role).splitlines():
        if "rm -f" in line or "rm -rf" in line:
            assert "not" in line.lower(), line


def test_write_keeps_one_file_per_role_and_follows_changes(tmp_path: Path) -> None:
    folder, repo = tmp_path / "ticket", tmp_path / "repo"
    repo.mkdir()
    path = contracts.write(folder, repo, "reviewer")
    assert path == folder / "contracts" / "reviewer.md"
    assert path.read_text() == contracts.compose(repo, "reviewer")
    (repo / ".handoff").mkdir()
    (repo / ".handoff" / "local-reviewer.md").write_text("Check the docs too.\n")
    assert "Check the docs too." in contracts.write(folder, repo, "reviewer").read_text()


def test_a_security_reviewer_gets_the_reviewers_rules_and_its_focus(tmp_path: Path) -> None:
    text = contracts.compose(tmp_path, "security", Kind.REVIEWER, focus="security")
    assert text.startswith("# Your role: reviewer")
    assert "You are **security**, a reviewer, of one ticket" in text
    assert "## How you hand off (exactly)" in text, "the protocol stays handoff's"
    assert "# Your focus: security" in text and "You never edit code" in text
    assert text.index("# Your focus: security") < text.index("# How we work (both roles)")


def test_a_projects_own_contract_is_added_to_its_kinds(tmp_path: Path) -> None:
    (tmp_path / ".handoff").mkdir()
    (tmp_path / ".handoff" / "api.md").write_text("# API review\n\nCheck every endpoint.\n")
    text = contracts.compose(tmp_path, "api", Kind.REVIEWER, contract=".handoff/api.md")
    assert "# Your role: reviewer" in text and "Check every endpoint." in text
    with pytest.raises(UsageError) as caught:
        contracts.compose(tmp_path, "api", Kind.REVIEWER, contract=".handoff/missing.md")
    assert "missing.md does not exist" in caught.value.message


def test_a_tester_gets_the_testers_contract(tmp_path: Path) -> None:
    text = contracts.compose(tmp_path, "tester")
    assert text.startswith("# Your role: tester") and "Do not change code that is not a test" \
        in text

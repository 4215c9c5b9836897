"""handoff.machinery.credentials: a token in a git config (a remote's URL, an insteadOf, an
extraHeader) is taken out of the copy the fences show and of what handoff says. Real git
writes the config here."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery import credentials
from handoff.machinery.credentials import redacted_config
from tests.conftest import git


def test_the_fences_get_a_copy_without_the_tokens(repo: Path, tmp_path: Path) -> None:
    git(repo, "remote", "add", "origin", "https://ann:ghp_s3cret@github.com/o/r.git")
    git(repo, "config", "url.https://bot:tok3n@mirror.example/.insteadOf", "https://example/")
    git(repo, "config", "http.extraHeader", "Authorization: Basic Zm9vOmJhcg==")
    into = tmp_path / "fence" / "config"
    into.parent.mkdir()
    assert redacted_config(repo / ".git", into) == into
    shown = into.read_text()
    for secret in ("ghp_s3cret", "tok3n", "Zm9vOmJhcg=="):
        assert secret not in shown
        assert secret in (repo / ".git" / "config").read_text(), "the config itself is untouched"
    assert "https://github.com/o/r.git" in shown and "mirror.example" in shown
    # what the copy says is still a git config git reads
    assert git(repo, "config", "--file", str(into), "remote.origin.url") == (
        "https://github.com/o/r.git")


def test_a_config_without_tokens_is_shown_as_it_is(repo: Path, tmp_path: Path) -> None:
    git(repo, "remote", "add", "origin", "https://github.com/o/r.git")
    into = tmp_path / "config"
    assert redacted_config(repo / ".git", into) is None and not into.exists()
    assert redacted_config(tmp_path / "no-repo", into) is None, "no config: nothing to hide"


def test_an_outsized_config_is_not_read(repo: Path, tmp_path: Path) -> None:
    config = repo / ".git" / "config"
    config.write_text(config.read_text() + "[remote \"o\"]\n\turl = https://a:b@h/r\n"
                      + "#" * credentials.LIMIT + "\n")
    assert redacted_config(repo / ".git", tmp_path / "config") is None

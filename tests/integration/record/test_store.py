"""handoff.record.store: ticket ids, where state lives, repository keys and atomic writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import ExternalFailure
from handoff.record.store import (
    atomic_write,
    repo_key,
)
from tests.conftest import git
from tests.faults.test_record_faults import fill, small_disk


def test_a_linked_worktree_maps_to_its_repos_key(repo: Path, tmp_path: Path) -> None:
    """From inside a worktree git reports the same common dir, so the key (common dir and main
    checkout) is the same as from the main checkout: one ticket folder per repository."""
    linked = tmp_path / "elsewhere" / "implementer"
    git(repo, "worktree", "add", "-q", "--detach", str(linked), "HEAD")

    def key_at(path: Path) -> str:
        common = Path(git(path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        return repo_key(common, common.parent)

    assert key_at(linked) == key_at(repo)
    assert key_at(repo).startswith("repo-")


# ---- a full disk -----------------------------------------------------------------------------


def test_a_full_disk_is_a_clear_error_and_keeps_the_old_file(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        target = disk / "T-1" / "state.json"
        atomic_write(target, "old and whole\n")
        fill(disk)
        with pytest.raises(ExternalFailure) as caught:
            atomic_write(target, "new " * 10_000)
        assert str(target) in caught.value.message
        assert "No space left on device" in caught.value.message
        assert "free space" in caught.value.hint
        assert target.read_text(encoding="utf-8") == "old and whole\n"
        assert [p.name for p in target.parent.iterdir()] == ["state.json"], "no temp file left"

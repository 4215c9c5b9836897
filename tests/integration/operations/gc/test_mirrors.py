"""handoff.operations.gc.mirrors: on a host, a mirror no ticket uses and that holds no ticket's
refs goes; one a live ticket uses, or that still holds a ticket's branch, stays."""

from __future__ import annotations

from pathlib import Path

from handoff.operations.gc.found import Options
from handoff.operations.gc.mirrors import MIRRORS, mirror_leftovers
from handoff.phases import Phase
from tests.conftest import git
from tests.unit.operations.gc.test_found import saved


def mirror(home: Path, name: str, *branches: str) -> Path:
    """A repository as a host keeps it for another machine's tickets."""
    path = home / MIRRORS / name
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "commit", "-q", "--allow-empty", "-m", "base")
    for branch in branches:
        git(path, "branch", branch)
    return path


def test_a_mirror_holding_no_tickets_refs_goes_unless_dry_run(handoff_home: Path) -> None:
    empty = mirror(handoff_home, "repo-aaaa", "main-copy")
    [named] = mirror_leftovers(handoff_home, [], Options(dry_run=True))
    assert (named.kind, named.path, named.removable, named.removed) == \
        ("mirror", str(empty), True, False)
    assert empty.is_dir()
    [removed] = mirror_leftovers(handoff_home, [], Options())
    assert removed.removed and not empty.exists()


def test_a_mirror_still_holding_a_tickets_branch_or_base_is_named_and_kept(
        handoff_home: Path) -> None:
    unfetched = mirror(handoff_home, "repo-bbbb", "handoff/R-1")
    based = mirror(handoff_home, "repo-cccc", "handoff-base/R-2")
    found = {i.path: i for i in mirror_leftovers(handoff_home, [], Options())}
    assert not found[str(unfetched)].removable and "handoff/R-1" in found[str(unfetched)].why
    assert not found[str(based)].removable and "handoff-base/R-2" in found[str(based)].why
    assert unfetched.is_dir() and based.is_dir()


def test_a_live_tickets_mirror_stays_and_a_closed_ones_goes(handoff_home: Path) -> None:
    used = mirror(handoff_home, "repo-dddd")
    closed = mirror(handoff_home, "repo-eeee")
    records = [saved(handoff_home, "R-4", repo=str(closed), phase=Phase.CLOSED),
               saved(handoff_home, "R-5", repo=str(used))]
    assert [i.path for i in mirror_leftovers(handoff_home, records, Options())] == [str(closed)]
    assert used.is_dir() and not closed.exists()


def test_what_is_no_mirror_is_not_looked_at(handoff_home: Path, tmp_path: Path) -> None:
    assert mirror_leftovers(handoff_home, [], Options()) == [], "no mirrors folder"
    (handoff_home / MIRRORS / "loose").mkdir(parents=True)
    elsewhere = mirror(tmp_path, "elsewhere")
    (handoff_home / MIRRORS / "linked").symlink_to(elsewhere)
    assert mirror_leftovers(handoff_home, [], Options()) == []
    assert elsewhere.is_dir() and (handoff_home / MIRRORS / "loose").is_dir()

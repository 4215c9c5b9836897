"""handoff.operations.gc.found: the ticket records gc reads (state.json, else its backup, else
the event log), what it skips under HANDOFF_HOME, and how a failed removal is said."""

from __future__ import annotations

from pathlib import Path

from handoff.operations.gc.found import read_records, repo_at
from handoff.phases import Phase
from tests.unit.operations.gc.test_found import saved


def test_a_record_is_read_from_its_state_and_names_its_repository(
        handoff_home: Path, repo: Path) -> None:
    live = saved(handoff_home, "T-1", str(repo.resolve()))
    assert live.repo is not None and live.repo.top == repo.resolve() and not live.closed
    closed = saved(handoff_home, "T-2", str(repo.resolve()), Phase.CLOSED)
    assert closed.closed and closed.state.phase == Phase.CLOSED


def test_a_damaged_state_falls_back_on_its_backup_then_its_event_log(
        handoff_home: Path, repo: Path) -> None:
    record = saved(handoff_home, "T-1", str(repo.resolve()), Phase.CLOSED)
    record.tdir.state_file.write_text("{torn")
    [again] = read_records(handoff_home)
    assert again.closed, "state.json.bak still says closed"
    record.tdir.backup_file.unlink()
    record.tdir.state_file.unlink()
    record.tdir.events.append("created", repo=str(repo.resolve()), base="main")
    record.tdir.events.append("phase", to="closed")
    [from_log] = read_records(handoff_home)
    assert from_log.closed and from_log.repo is not None and from_log.repo.top == repo.resolve()


def test_a_repository_counts_only_where_its_top_folder_still_is(repo: Path,
                                                                tmp_path: Path) -> None:
    found = repo_at(str(repo))
    assert found is not None and found.top == repo.resolve()
    inner = repo / "sub"
    inner.mkdir()
    assert repo_at(str(inner)) is None, "git finds the repository around it: not its top"
    assert repo_at(str(tmp_path / "gone")) is None and repo_at("") is None
    plain = tmp_path / "plain"
    plain.mkdir()
    assert repo_at(str(plain)) is None

"""handoff.record.ticket: the per-ticket directory layout, state.json, and finding tickets."""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import pytest

from handoff.errors import NotFound, UsageError
from handoff.phases import PHASES, Phase
from handoff.record.events import EventLog
from handoff.record.ticket import State, TicketDir, all_tickets, find, ticket_dir


def make_state(ticket: str = "PROJ-1", key: str = "repo-0123456789") -> State:
    return State(ticket=ticket, repo="/src/repo", repo_key=key)


def save_ticket(home: Path, key: str, ticket: str) -> TicketDir:
    tdir = ticket_dir(home, key, ticket)
    tdir.save(make_state(ticket, key))
    return tdir


# ---- State -------------------------------------------------------------------------------------


def test_a_new_state_awaits_approval_in_round_zero() -> None:
    state = make_state()
    assert state.phase == "awaiting-approval" == PHASES[0]
    assert state.round == 0
    assert state.commits == {} and state.verdicts == {}


def test_state_save_and_load_round_trip(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    state = make_state()
    state.phase, state.round = Phase.REVIEWING, 2
    state.commits = {"1": "a" * 40, "2": "b" * 40}
    state.verdicts = {"1": "fail"}
    state.findings = {"1": ["calc.py::wrong sign"]}
    state.worktrees = {"implementer": "/w/i", "reviewer": "/w/r"}
    state.feedback = {"round": 2, "notes": [["t", "x"]]}
    state.reason = "ünïcode reason"
    tdir.save(state)
    loaded = tdir.load()
    assert loaded == state
    assert loaded is not state


def test_save_refreshes_updated(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    state = make_state()
    state.updated = "2000-01-01T00:00:00.000+00:00"
    tdir.save(state)
    loaded = tdir.load()
    assert loaded.updated != "2000-01-01T00:00:00.000+00:00"
    assert datetime.fromisoformat(loaded.updated) > datetime.fromisoformat(
        "2000-01-01T00:00:00.000+00:00")


def test_state_json_is_plain_json_on_disk(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    tdir.save(make_state())
    data = json.loads(tdir.state_file.read_text(encoding="utf-8"))
    assert data["ticket"] == "PROJ-1"
    assert data["phase"] == "awaiting-approval"


def test_unknown_keys_in_state_json_are_ignored(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    data = asdict(make_state())
    data["round"] = 3
    data["written_by_a_newer_version"] = {"x": 1}
    tdir.path.mkdir(parents=True)
    tdir.state_file.write_text(json.dumps(data), encoding="utf-8")
    loaded = tdir.load()
    assert loaded.round == 3
    assert not hasattr(loaded, "written_by_a_newer_version")


def test_from_dict_ignores_unknown_keys() -> None:
    state = State.from_dict({"ticket": "T", "repo": "/r", "repo_key": "k", "bogus": True})
    assert state == State(ticket="T", repo="/r", repo_key="k", created=state.created,
                          updated=state.updated)


def test_loading_without_state_json_is_not_found(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    with pytest.raises(NotFound) as caught:
        tdir.load()
    assert "PROJ-1" in caught.value.message


def test_loading_a_corrupt_state_json_is_a_usage_error(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    tdir.path.mkdir(parents=True)
    tdir.state_file.write_text('{"ticket": "PROJ-1", "repo', encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        tdir.load()
    assert str(tdir.state_file) in caught.value.message


@pytest.mark.parametrize("text", ["[]", '"PROJ-1"', "{}", '{"phase": "reviewing"}'])
def test_a_state_json_of_the_wrong_shape_is_a_usage_error(text: str, handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    tdir.path.mkdir(parents=True)
    tdir.state_file.write_text(text, encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        tdir.load()
    assert str(tdir.state_file) in caught.value.message


def test_commit_of_a_round() -> None:
    state = make_state()
    state.commits = {"1": "a" * 40}
    assert state.commit_of(1) == "a" * 40
    assert state.commit_of(2) == ""


def test_last_commit_is_the_base_before_any_round() -> None:
    state = make_state()
    state.base_commit = "f" * 40
    assert state.last_commit() == "f" * 40


def test_last_commit_is_the_newest_round_numerically() -> None:
    state = make_state()
    state.base_commit = "f" * 40
    state.commits = {"2": "2" * 40, "10": "a" * 40, "9": "9" * 40}
    assert state.last_commit() == "a" * 40


# ---- TicketDir layout --------------------------------------------------------------------------


def test_ticket_dir_layout(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-12")
    root = handoff_home / "repo-0123456789" / "PROJ-12"
    assert tdir.path == root
    assert tdir.ticket == "PROJ-12"
    assert tdir.state_file == root / "state.json"
    assert tdir.ticket_md == root / "ticket.md"
    assert tdir.plan_md == root / "plan.md"
    assert tdir.final_report == root / "final-report.md"
    assert tdir.events == EventLog(root / "events.jsonl")
    assert tdir.lock_file.parent == root
    assert tdir.brief("implementer", 1) == root / "inbox" / "implementer" / "brief-1.md"
    assert tdir.brief("reviewer", 3) == root / "inbox" / "reviewer" / "brief-3.md"
    assert tdir.report("implementer", 2) == root / "impl-report-2.md"
    assert tdir.report("reviewer", 2) == root / "review-report-2.md"
    assert tdir.diff(2) == root / "diff-2.patch"
    assert tdir.gate_log(2) == root / "gate-2.log"
    assert tdir.answer(1).parent.parent == root
    assert tdir.answer(1) != tdir.answer(2)


def test_ticket_dir_creates_nothing(handoff_home: Path) -> None:
    ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    assert not handoff_home.exists()


@pytest.mark.parametrize("ticket", ["../x", "a/b", "", "..", "-x"])
def test_ticket_dir_refuses_hostile_ids(ticket: str, handoff_home: Path) -> None:
    with pytest.raises(UsageError):
        ticket_dir(handoff_home, "repo-0123456789", ticket)


def test_transcript_never_overwrites(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    taken: list[Path] = []
    for i in range(4):
        path = tdir.transcript("reviewer", 2)
        assert path.parent == tdir.path / "transcripts"
        assert not path.exists()
        assert path not in taken
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"capture {i}\n", encoding="utf-8")
        taken.append(path)
    assert [p.read_text(encoding="utf-8") for p in taken] == [f"capture {i}\n" for i in range(4)]


def test_transcripts_of_other_roles_and_rounds_are_separate(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    paths = {tdir.transcript(role, n) for role in ("implementer", "reviewer") for n in (1, 2)}
    assert len(paths) == 4


# ---- all_tickets and find ----------------------------------------------------------------------


def test_all_tickets_of_a_missing_home_is_empty(tmp_path: Path) -> None:
    assert all_tickets(tmp_path / "nowhere") == []


def test_all_tickets_lists_only_folders_with_state(handoff_home: Path) -> None:
    kept = save_ticket(handoff_home, "alpha-1111111111", "PROJ-1")
    (handoff_home / "alpha-1111111111" / "EMPTY").mkdir()
    (handoff_home / "config.yaml").write_text("max_rounds: 2\n", encoding="utf-8")
    assert all_tickets(handoff_home) == [kept]


def test_the_same_ticket_id_in_two_repos(handoff_home: Path) -> None:
    one = save_ticket(handoff_home, "alpha-1111111111", "PROJ-1")
    two = save_ticket(handoff_home, "beta-2222222222", "PROJ-1")
    other = save_ticket(handoff_home, "beta-2222222222", "PROJ-2")
    assert set(all_tickets(handoff_home)) == {one, two, other}
    assert len(all_tickets(handoff_home)) == 3
    assert one.path != two.path

    with pytest.raises(UsageError) as caught:
        find(handoff_home, "PROJ-1")
    assert "alpha-1111111111" in caught.value.message
    assert "beta-2222222222" in caught.value.message

    assert find(handoff_home, "PROJ-1", "alpha-1111111111") == one
    assert find(handoff_home, "PROJ-1", "beta-2222222222") == two
    assert find(handoff_home, "PROJ-2") == other
    assert find(handoff_home, "PROJ-1", "alpha-1111111111").load().repo_key == "alpha-1111111111"


def test_find_an_unknown_ticket_is_not_found(handoff_home: Path) -> None:
    save_ticket(handoff_home, "alpha-1111111111", "PROJ-1")
    with pytest.raises(NotFound):
        find(handoff_home, "PROJ-9")
    with pytest.raises(NotFound):
        find(handoff_home, "PROJ-1", "beta-2222222222")


def test_find_does_not_match_a_prefix_or_another_case(handoff_home: Path) -> None:
    save_ticket(handoff_home, "alpha-1111111111", "PROJ-10")
    with pytest.raises(NotFound):
        find(handoff_home, "PROJ-1")
    with pytest.raises(NotFound):
        find(handoff_home, "proj-10")


@pytest.mark.parametrize("ticket", ["../alpha-1111111111/PROJ-1", "*", "PROJ-1/..", ""])
def test_find_refuses_hostile_ids(ticket: str, handoff_home: Path) -> None:
    save_ticket(handoff_home, "alpha-1111111111", "PROJ-1")
    with pytest.raises(UsageError):
        find(handoff_home, ticket)


# ---- the backup of state.json, and damaged files kept --------------------------------------------


def test_every_save_keeps_a_backup_of_its_own(handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    state = make_state()
    state.round = 2
    tdir.save(state)
    assert tdir.backup_file.read_text(encoding="utf-8") == \
        tdir.state_file.read_text(encoding="utf-8")
    assert tdir.backup_file.stat().st_ino != tdir.state_file.stat().st_ino, \
        "a hard link would be damaged by an in-place write along with state.json"
    tdir.state_file.write_text('{"ticket": "PROJ-1", "rou', encoding="utf-8")  # in place
    with pytest.raises(UsageError):
        tdir.load()
    assert tdir.load_backup() == tdir.load_backup()
    assert tdir.load_backup().round == 2


def test_setting_aside_never_overwrites_an_earlier_damaged_file(handoff_home: Path) -> None:
    tdir = save_ticket(handoff_home, "repo-0123456789", "PROJ-1")
    for n, text in enumerate(("garbage one", "garbage two"), start=1):
        tdir.state_file.write_text(text, encoding="utf-8")
        assert tdir.set_aside().name == f"state.json.corrupt-{n}"
        assert not tdir.state_file.exists()
    assert (tdir.path / "state.json.corrupt-1").read_text(encoding="utf-8") == "garbage one"
    assert (tdir.path / "state.json.corrupt-2").read_text(encoding="utf-8") == "garbage two"


@pytest.mark.parametrize("change", [{"round": "2"}, {"commits": []}, {"phase": "dancing"},
                                    {"ticket": 7}, {"relaunched": None}, {"team": "x"}])
def test_a_state_json_with_a_field_of_the_wrong_type_is_refused_when_read(
        change: dict[str, object], handoff_home: Path) -> None:
    tdir = ticket_dir(handoff_home, "repo-0123456789", "PROJ-1")
    data = {**asdict(make_state()), **change}
    tdir.path.mkdir(parents=True)
    tdir.state_file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(UsageError) as caught:
        tdir.load()
    assert "not a handoff state file" in caught.value.message

"""handoff.loop.workspace: a ticket's workspace (its record, repository, configuration and
worktrees), what each peer and the gate are given, and what a closed ticket keeps. On real
tickets, with no peer running."""

from __future__ import annotations

import os
from pathlib import Path

from handoff.config import Config
from handoff.loop.monitor import PeerMonitor
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import Repo
from handoff.providers import RoleSpec, clistate, get
from handoff.record.ticket import TicketDir
from tests.paper import paper_ticket
from tests.unit.providers.test_clistate import person_claude
from tests.unit.providers.test_sessions import claude_lines, write_jsonl


def test_a_closed_ticket_keeps_no_copy_of_a_login(tmp_path: Path,
                                                  isolated: dict[str, str]) -> None:
    """`handoff close` (Workspace.forget_logins) removes every role's copy of every CLI's
    login, and nothing else: the session logs stay with the record."""
    home = Path(isolated["HOME"])
    person_claude(home, tmp_path / "repo")
    (home / ".codex").mkdir()
    (home / ".codex" / "auth.json").write_text('{"OPENAI_API_KEY": "sk-1"}')
    tdir = TicketDir(tmp_path / "state" / "repo-1" / "T-1")
    ws = Workspace(home=tmp_path / "state", tdir=tdir, repo=Repo(top=tmp_path / "repo",
                   common_dir=tmp_path / "repo" / ".git"), config=Config())
    claude = get(RoleSpec(provider="claude"), tdir.cli("implementer"))
    codex = get(RoleSpec(provider="codex"), tdir.cli("reviewer"))
    for provider in (claude, codex):
        clistate.seed(provider, os.environ, tmp_path / "wt")
    assert claude.own is not None and codex.own is not None
    log = write_jsonl(claude.own / "projects" / "-wt" / "s.jsonl", claude_lines())
    (tdir.path / "cli" / "elsewhere").symlink_to(home / ".claude")
    assert sorted(ws.forget_logins()) == sorted([claude.own / ".credentials.json",
                                                 codex.own / "auth.json"])
    assert not (claude.own / ".credentials.json").exists()
    assert not (codex.own / "auth.json").exists()
    assert log.is_file() and (claude.own / "settings.json").is_file()
    assert (home / ".claude" / ".credentials.json").is_file(), "the person's own stays"


def test_a_plan_with_no_test_command_gets_the_repositorys_and_its_own_wins(
        handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True)
    (handoff_home / "config.yaml").write_text("test: python -m pytest -q\n", encoding="utf-8")
    ws = paper_ticket(handoff_home)
    assert ws.plan().test == ("python", "-m", "pytest", "-q")
    assert ws.plan().review_commands == (("python", "-m", "pytest", "-q"),), "reviewers run it"
    ws.tdir.plan_md.write_text("---\ntest: make check\n---\n# Fix add\n", encoding="utf-8")
    assert ws.plan().test == ("make", "check")


def test_a_stall_fix_names_the_file_its_timeout_came_from(handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True)
    (handoff_home / "config.yaml").write_text("stall_timeout: 5\n", encoding="utf-8")
    timing = paper_ticket(handoff_home).timing()
    assert timing.stall == 5
    assert timing.file("stall_timeout") == str(handoff_home / "config.yaml")
    stalled = PeerMonitor(0.0, timing).observe(10.0, None, [], False, "")
    assert [d.fix for d in stalled] == ["attach to see what it is doing; raise stall_timeout in "
                                        f"{handoff_home / 'config.yaml'} for work that is "
                                        "legitimately this slow"]

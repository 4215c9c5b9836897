"""handoff.config.roles: the team, role by role over the files before, each role checked
against its provider, and what kind each role is."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.config import load
from handoff.config.roles import kind_of
from handoff.providers import RoleSpec
from handoff.role import Kind
from tests.configfiles import refused, repo_file, user_file


def test_roles_merge_role_by_role(home: Path, project: Path) -> None:
    user_file(home, "roles:\n  implementer: {provider: claude}\n  reviewer: {provider: codex}\n")
    repo_file(project, "roles:\n  reviewer: {provider: gemini}\n")
    assert load(home, project).providers == {"implementer": "claude", "reviewer": "gemini"}


def test_a_role_carries_model_args_mode_env_and_answers(home: Path, project: Path) -> None:
    repo_file(project, (
        "roles:\n"
        "  implementer:\n"
        "    provider: claude\n    model: opus\n    args: [--verbose]\n"
        "    permission_mode: acceptEdits\n    env: [ANTHROPIC_API_KEY, MY_TOKEN]\n"
        "    answer: [trust, api-key]\n    binary: /opt/claude/bin/claude\n"
        "  reviewer:\n"
        "    provider: command\n    command: [agent, --task, '{message}']\n"
        "    markers: {composer: '>', busy: 'thinking', turn_ended: '^done'}\n"
    ))
    config = load(home, project)
    assert config.roles["implementer"] == RoleSpec(
        provider="claude", model="opus", args=("--verbose",), permission_mode="acceptEdits",
        env=("ANTHROPIC_API_KEY", "MY_TOKEN"), answer=("trust", "api-key"),
        binary="/opt/claude/bin/claude")
    assert config.roles["reviewer"].command == ("agent", "--task", "{message}")
    assert config.roles["reviewer"].markers == {"composer": ">", "busy": "thinking",
                                               "turn_ended": "^done"}


def test_a_later_file_refines_a_role_of_the_same_provider(home: Path, project: Path) -> None:
    user_file(home, "roles:\n  implementer: {provider: claude, model: opus, args: [-x]}\n")
    repo_file(project, "roles:\n  implementer: {model: sonnet}\n")
    spec = load(home, project).roles["implementer"]
    assert (spec.provider, spec.model, spec.args) == ("claude", "sonnet", ("-x",))


def test_a_later_file_naming_another_provider_starts_the_role_afresh(home: Path,
                                                                    project: Path) -> None:
    user_file(home, "roles:\n  implementer: {provider: claude, model: opus, args: [-x]}\n")
    repo_file(project, "roles:\n  implementer: {provider: codex}\n")
    assert load(home, project).roles["implementer"] == RoleSpec(provider="codex")


BAD_ROLES = [
    ("roles: claude\n", "roles"),
    ("roles:\n  security: {provider: claude}\n", "security"),
    ("roles:\n  gate: {provider: claude, kind: reviewer}\n", "gate"),
    ("roles:\n  a.b: {provider: claude, kind: reviewer}\n", "a.b"),
    ("roles:\n  implementer: null\n", "implementer"),
    ("roles:\n  reviewer: null\n", "reviewer"),
    ("roles:\n  coder: {provider: claude, kind: implementer}\n", "coder"),
    ("roles:\n  reviewer: {kind: implementer}\n", "reviewer"),
    ("roles:\n  sec: {provider: claude, kind: boss}\n", "sec.kind"),
    ("roles:\n  sec: {provider: claude, focus: style}\n", "sec.focus"),
    ("roles:\n  qa: {provider: claude, kind: tester, focus: security}\n", "qa.focus"),
    ("roles:\n  sec: {kind: reviewer, contract: /etc/passwd}\n", "sec.contract"),
    ("roles:\n  sec: {kind: reviewer, contract: ../x.md}\n", "sec.contract"),
    ("roles:\n  implementer: claude\n", "implementer"),
    ("roles:\n  reviewer: {provider: 3}\n", "reviewer"),
    ("roles:\n  reviewer: {model: 3}\n", "reviewer.model"),
    ("roles:\n  reviewer: {provider: nope}\n", "nope"),
    ("roles:\n  reviewer: {provider: claude, permission_mode: yolo}\n", "permission_mode"),
    ("roles:\n  reviewer: {provider: codex, permission_mode: acceptEdits}\n", "permission_mode"),
    ("roles:\n  reviewer: {provider: claude, env: [CLAUDE_CODE_SESSION_ID]}\n",
     "CLAUDE_CODE_SESSION_ID"),
    ("roles:\n  reviewer: {provider: codex, env: [CODEX_THREAD_ID]}\n", "CODEX_THREAD_ID"),
    ("roles:\n  reviewer: {provider: claude, env: [AI_AGENT]}\n", "AI_AGENT"),
    ("roles:\n  reviewer: {provider: claude, answer: [settings-error]}\n", "settings-error"),
    ("roles:\n  reviewer: {provider: claude, answer: [sign-in]}\n", "sign-in"),
    ("roles:\n  reviewer: {provider: command}\n", "command"),
    ("roles:\n  reviewer: {provider: command, command: [echo, '{message']}\n", "{message"),
    ("roles:\n  reviewer: {provider: command, command: [echo, '{nope}']}\n", "{nope}"),
    ("roles:\n  reviewer: {provider: claude, command: [x]}\n", "command"),
    ("roles:\n  reviewer: {provider: command, command: [x], markers: {busy: '('}}\n",
     "markers.busy"),
    ("roles:\n  reviewer: {provider: command, command: [x], markers: {idle: x}}\n", "idle"),
    ("roles:\n  reviewer: {provider: claude, colour: red}\n", "colour"),
    ("roles:\n  reviewer: {provider: claude, args: --verbose}\n", "args"),
    ("roles:\n  reviewer: {provider: claude, env: [CLAUDECODE]}\n", "CLAUDECODE"),
    ("roles:\n  reviewer: {provider: claude, backend: azure}\n", "backend"),
    ("roles:\n  reviewer: {provider: codex, backend: vertex}\n", "backend"),
]


@pytest.mark.parametrize("which", ["user", "repo"])
@pytest.mark.parametrize(("text", "key"), BAD_ROLES)
def test_a_bad_role_names_the_file_and_the_key(text: str, key: str, which: str, home: Path,
                                         project: Path) -> None:
    assert key in refused(home, project, which, text)


def test_roles_are_data_each_with_a_kind_in_working_order(home: Path, project: Path) -> None:
    repo_file(project, "roles:\n"
                       "  implementer: {provider: codex}\n"
                       "  security: {provider: codex, kind: reviewer, focus: security}\n"
                       "  reviewer: {provider: claude}\n"
                       "  tester: {provider: claude}\n"
                       "  e2e: {provider: scripted, kind: tester}\n")
    team = load(home, project).team
    assert [(r.name, str(r.kind)) for r in team.roles] == [
        ("implementer", "implementer"), ("tester", "tester"), ("e2e", "tester"),
        ("security", "reviewer"), ("reviewer", "reviewer")]
    assert team.testers == ("tester", "e2e") and team.reviewers == ("security", "reviewer")


def test_a_focus_says_a_reviewer_without_a_kind(home: Path, project: Path) -> None:
    repo_file(project, "roles:\n  security: {provider: claude, focus: security}\n")
    config = load(home, project)
    assert config.team.reviewers == ("reviewer", "security")
    assert config.roles["security"].focus == "security"


def test_the_users_roles_and_the_repos_add_up_and_null_takes_one_off(home: Path,
                                                                     project: Path) -> None:
    user_file(home, "roles:\n  security: {provider: codex, focus: security}\n")
    repo_file(project, "roles:\n  qa: {kind: tester}\n")
    assert load(home, project).team.names == ("implementer", "qa", "reviewer", "security")
    repo_file(project, "roles:\n  security: null\n")
    assert load(home, project).team.names == ("implementer", "reviewer")


def test_what_a_role_is_stays_when_a_later_file_changes_its_provider(home: Path,
                                                                    project: Path) -> None:
    user_file(home, "roles:\n  sec: {provider: claude, kind: reviewer, focus: security}\n")
    repo_file(project, "roles:\n  sec: {provider: codex}\n")
    spec = load(home, project).roles["sec"]
    assert (spec.provider, spec.kind, spec.focus) == ("codex", "reviewer", "security")


def test_a_roles_kind_is_its_own_else_what_its_name_says_else_a_reviewer() -> None:
    assert kind_of("e2e", RoleSpec(kind="tester")) is Kind.TESTER
    assert kind_of("reviewer", RoleSpec(kind="tester")) is Kind.TESTER
    assert kind_of("tester", RoleSpec()) is Kind.TESTER
    assert kind_of("implementer", RoleSpec()) is Kind.IMPLEMENTER
    assert kind_of("security", RoleSpec(focus="security")) is Kind.REVIEWER

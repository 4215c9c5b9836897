"""handoff.config: defaults, the user's file under the repo's, and errors naming file and key."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from handoff.config import PEER_NICE, REPO_CONFIG, Config, Host, Share, config_template, load
from handoff.errors import UsageError
from handoff.inputs import CONFIG_LIMIT
from handoff.providers import RoleSpec


@pytest.fixture
def home(handoff_home: Path) -> Path:
    handoff_home.mkdir(parents=True, exist_ok=True)
    return handoff_home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def user_file(home: Path, text: str) -> Path:
    path = home / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def repo_file(project: Path, text: str) -> Path:
    path = project / REPO_CONFIG
    path.write_text(text, encoding="utf-8")
    return path


def test_repo_config_is_the_documented_name() -> None:
    assert REPO_CONFIG == ".handoff.yaml"


def test_defaults_without_any_file(home: Path, project: Path) -> None:
    config = load(home, project)
    assert config == Config()
    assert config.max_rounds == 3  # the README's default
    assert set(config.providers) == {"implementer", "reviewer"}
    assert config.share == () and config.post_create == () and config.env_allow == ()
    assert load(home, None) == Config()
    assert load(home / "missing", None) == Config()


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_an_empty_file_changes_nothing(text: str, home: Path, project: Path) -> None:
    user_file(home, text)
    repo_file(project, text)
    assert load(home, project) == Config()


def test_the_user_file_applies(home: Path, project: Path) -> None:
    user_file(home, "max_rounds: 5\ngate_timeout: 30\nenv_allow: [HTTP_PROXY]\n")
    config = load(home, project)
    assert config.max_rounds == 5
    assert config.gate_timeout == 30.0
    assert config.env_allow == ("HTTP_PROXY",)
    assert config.max_gate_bounces == Config().max_gate_bounces


def test_the_repo_file_overrides_the_user_file(home: Path, project: Path) -> None:
    user_file(home, "max_rounds: 5\nmax_relaunches: 4\nenv_allow: [A]\n")
    repo_file(project, "max_rounds: 2\nenv_allow: [B, C]\n")
    config = load(home, project)
    assert config.max_rounds == 2
    assert config.env_allow == ("B", "C")
    assert config.max_relaunches == 4  # set by the user only, kept


def test_the_repo_file_alone_applies(home: Path, project: Path) -> None:
    repo_file(project, "max_gate_bounces: 7\n")
    assert load(home, project).max_gate_bounces == 7
    assert load(home, None).max_gate_bounces == Config().max_gate_bounces


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


def test_timings_are_read(home: Path, project: Path) -> None:
    repo_file(project, "start_timeout: 30\nstall_timeout: 600\nturn_grace: 2.5\n")
    config = load(home, project)
    assert (config.start_timeout, config.stall_timeout, config.turn_grace) == (30, 600, 2.5)


def test_share_post_create_and_zero_relaunches(home: Path, project: Path) -> None:
    repo_file(project, (
        "max_relaunches: 0\n"
        "share:\n  - .venv\n  - {path: node_modules, mode: copy}\n  - {path: build/cache}\n"
        "post_create:\n  - [npm, ci]\n  - [make, setup, 'A B']\n"
    ))
    config = load(home, project)
    assert config.max_relaunches == 0
    assert config.share == (Share(".venv", "symlink"), Share("node_modules", "copy"),
                            Share("build/cache", "symlink"))
    assert config.post_create == (("npm", "ci"), ("make", "setup", "A B"))


BAD_VALUES = [
    ("max_rounds: 0\n", "max_rounds"),
    ("max_rounds: three\n", "max_rounds"),
    ("max_rounds: 2.5\n", "max_rounds"),
    ("max_rounds: true\n", "max_rounds"),
    ("max_gate_bounces: -1\n", "max_gate_bounces"),
    ("max_gate_bounces: [1]\n", "max_gate_bounces"),
    ("max_relaunches: -1\n", "max_relaunches"),
    ("max_relaunches: '2'\n", "max_relaunches"),
    ("gate_timeout: 0\n", "gate_timeout"),
    ("gate_timeout: -5\n", "gate_timeout"),
    ("gate_timeout: soon\n", "gate_timeout"),
    ("gate_timeout: false\n", "gate_timeout"),
    ("gate_timeout: .nan\n", "gate_timeout"),
    ("gate_timeout: .inf\n", "gate_timeout"),
    ("gate_timeout: -.inf\n", "gate_timeout"),
    ("gate_timeout: 1e400\n", "gate_timeout"),
    ("gate_timeout: 2592001\n", "gate_timeout"),
    ("stall_timeout: .nan\n", "stall_timeout"),
    ("turn_grace: .inf\n", "turn_grace"),
    ("api_patience: .NaN\n", "api_patience"),
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
    ("scanners: gitleaks\n", "scanners"),
    ("scanners:\n  - {name: x}\n", "scanners[0]"),
    ("scanners:\n  - {command: [x]}\n", "scanners[0].name"),
    ("scanners:\n  - {name: 'a b', command: [x]}\n", "scanners[0].name"),
    ("scanners:\n  - {name: a, command: [x]}\n  - {name: a, command: [y]}\n", "scanners[1]"),
    ("scanners:\n  - {name: a, command: x}\n", "scanners[0].command"),
    ("scanners:\n  - {name: a, command: [x, '{nope}']}\n", "{nope}"),
    ("scanners:\n  - {name: a, command: [x, '--f={changed_files}']}\n", "{changed_files}"),
    ("scanners:\n  - {name: a, command: ['{changed_files}']}\n", "scanners[0].command"),
    ("scanners:\n  - {name: a, command: [x], required: maybe}\n", "required"),
    ("scanners:\n  - {name: a, command: [x], when: always}\n", "when"),
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
    ("start_timeout: 0\n", "start_timeout"),
    ("stall_timeout: never\n", "stall_timeout"),
    ("turn_grace: -1\n", "turn_grace"),
    ("env_allow: [CODEX_SESSION_ID]\n", "CODEX_SESSION_ID"),
    ("env_allow: [CLAUDE_CODE_MESSAGING_TOKEN]\n", "CLAUDE_CODE_MESSAGING_TOKEN"),
    ("roles:\n  reviewer: {provider: claude, env: [CLAUDECODE]}\n", "CLAUDECODE"),
    ("roles:\n  reviewer: {provider: claude, backend: azure}\n", "backend"),
    ("roles:\n  reviewer: {provider: codex, backend: vertex}\n", "backend"),
    ("share: .venv\n", "share"),
    ("share:\n  - {mode: copy}\n", "share[0]"),
    ("share:\n  - .venv\n  - 7\n", "share[1]"),
    ("share:\n  - /etc\n", "share[0]"),
    ("share:\n  - ../outside\n", "share[0]"),
    ("share:\n  - {path: .venv, mode: hardlink}\n", "share[0]"),
    ("post_create: make setup\n", "post_create"),
    ("post_create:\n  - make setup\n", "post_create[0]"),
    ("post_create:\n  - [make]\n  - [make, 3]\n", "post_create[1]"),
    ("post_create:\n  - [make, '']\n", "post_create[0]"),
    ("env_allow: HTTP_PROXY\n", "env_allow"),
    ("env_allow: [HTTP_PROXY, 1]\n", "env_allow"),
    ("max_round: 3\n", "max_round"),
    ("providers: {implementer: claude}\n", "providers"),
]


@pytest.mark.parametrize("which", ["user", "repo"])
@pytest.mark.parametrize(("text", "key"), BAD_VALUES)
def test_a_bad_value_names_the_file_and_the_key(text: str, key: str, which: str, home: Path,
                                                project: Path) -> None:
    path = user_file(home, text) if which == "user" else repo_file(project, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert caught.value.exit_code == 2
    assert str(path) in caught.value.message
    assert key in caught.value.message


def test_claude_and_codex_configuration_passes_and_a_marker_is_refused_with_why(
        home: Path, project: Path) -> None:
    repo_file(project, "env_allow: [CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, MAX_THINKING_TOKENS,"
                       " CLAUDE_CODE_MAX_OUTPUT_TOKENS]\nroles:\n  reviewer: {provider: claude,"
                       " backend: vertex, env: [CLAUDE_CODE_USE_VERTEX]}\n")
    config = load(home, project)
    assert config.env_allow == ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "MAX_THINKING_TOKENS",
                                "CLAUDE_CODE_MAX_OUTPUT_TOKENS")
    assert config.roles["reviewer"].backend == "vertex"
    repo_file(project, "env_allow: [CODEX_THREAD_ID]\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert "CODEX_THREAD_ID never passes to a peer" in caught.value.message
    assert "running Codex" in caught.value.message and "CLAUDE_CONFIG_DIR" in (caught.value.hint or "")


def test_a_bad_repo_file_is_reported_even_when_the_user_file_is_fine(home: Path, project: Path) -> None:
    user_file(home, "max_rounds: 4\n")
    path = repo_file(project, "max_rounds: 0\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert str(home / "config.yaml") not in caught.value.message


def test_an_unknown_key_hints_at_the_known_ones(home: Path, project: Path) -> None:
    repo_file(project, "max_round: 3\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert "max_rounds" in caught.value.hint


@pytest.mark.parametrize("text", ["max_rounds: [3\n", "a: b: c\n", "key: 'unclosed\n", "\tmax_rounds: 3\n"])
def test_invalid_yaml_names_the_file(text: str, home: Path, project: Path) -> None:
    path = repo_file(project, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert "YAML" in caught.value.message


@pytest.mark.parametrize("text", ["- max_rounds\n- 3\n", "just a string\n", "42\n"])
def test_a_top_level_that_is_not_a_mapping_names_the_file(text: str, home: Path, project: Path) -> None:
    path = user_file(home, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message


def test_an_empty_post_create_command_is_refused(home: Path, project: Path) -> None:
    path = repo_file(project, "post_create:\n  - []\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert "post_create[0]" in caught.value.message


def test_the_init_template_is_a_valid_config_equal_to_the_defaults(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    written = config_template(repo)
    assert written is not None and written.is_file()
    assert load(tmp_path / "home", repo) == Config()
    assert config_template(repo) is None, "an existing file is never overwritten"


def test_the_init_template_names_the_chosen_providers(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    assert config_template(repo, "claude", "codex") is not None
    assert load(tmp_path / "home", repo).providers == {"implementer": "claude",
                                                       "reviewer": "codex"}


def test_the_longest_timeout_is_thirty_days(home: Path, project: Path) -> None:
    repo_file(project, "gate_timeout: 2592000\nstall_timeout: 0.5\n")
    config = load(home, project)
    assert config.gate_timeout == 2592000.0 and config.stall_timeout == 0.5


@pytest.mark.parametrize("which", ["user", "repo"])
@pytest.mark.parametrize("data", ["max_rounds: 2 # café\n".encode("latin-1"),
                                  b"max_rounds: 2\n\x00\x00"])
def test_a_file_that_is_not_utf8_text_names_the_file(which: str, data: bytes, home: Path,
                                                      project: Path) -> None:
    path = home / "config.yaml" if which == "user" else project / REPO_CONFIG
    path.write_bytes(data)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert caught.value.exit_code == 2
    assert caught.value.message.startswith(f"the configuration file {path} is ")
    assert "not UTF-8 text" in caught.value.message or "binary" in caught.value.message
    assert path.read_bytes() == data


def test_a_config_larger_than_its_limit_is_refused(home: Path, project: Path) -> None:
    repo_file(project, "# " + "x" * CONFIG_LIMIT + "\n")
    with pytest.raises(UsageError, match="is larger than 256 KiB"):
        load(home, project)


def test_yaml_aliases_are_refused_before_they_expand(home: Path, project: Path) -> None:
    """489 bytes of nested aliases once made doctor build billions of strings for its error."""
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    lines.append(f"max_rounds: [{','.join(['*h'] * 9)}]")
    path = repo_file(project, "\n".join(lines) + "\n")
    started = time.monotonic()
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert time.monotonic() - started < 2
    assert str(path) in caught.value.message and "stand for more than 10000 values" in \
        caught.value.message


# ---- the team -------------------------------------------------------------------------------------


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


def test_scanners_are_read_with_their_defaults(home: Path, project: Path) -> None:
    repo_file(project, "scanners:\n"
                       "  - {name: gitleaks, command: [gitleaks, detect, '--log-opts={diff_range}']}\n"
                       "  - {name: bandit, command: [bandit, -q, '{changed_py_files}'], "
                       "required: false}\n")
    found = load(home, project).scanners
    assert [(s.name, s.command, s.required) for s in found] == [
        ("gitleaks", ("gitleaks", "detect", "--log-opts={diff_range}"), True),
        ("bandit", ("bandit", "-q", "{changed_py_files}"), False)]


def test_the_init_template_offers_a_security_reviewer_on_a_second_cli(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    assert config_template(repo, "claude", "codex", "codex") is not None
    config = load(tmp_path / "home", repo)
    assert config.team.reviewers == ("reviewer", "security")
    assert (config.roles["security"].provider, config.roles["security"].focus) == \
        ("codex", "security")


def test_peer_nice_is_this_machines_and_a_niceness(home: Path, project: Path) -> None:
    assert load(home, project).peer_nice == PEER_NICE == 19
    user_file(home, "peer_nice: 0\n")
    assert load(home, project).peer_nice == 0
    for bad in ("20", "-1", "true", "high"):
        user_file(home, f"peer_nice: {bad}\n")
        with pytest.raises(UsageError, match="must be a niceness from 0"):
            load(home, project)
    user_file(home, "peer_nice: 5\n")
    repo_file(project, "peer_nice: 0\n")
    with pytest.raises(UsageError, match="'peer_nice' is this machine's, not a repository's"):
        load(home, project)


def test_hosts_are_this_machines_argv_each_ending_with_its_destination(home: Path,
                                                                        project: Path) -> None:
    user_file(home, 'hosts: {build1: {ssh: [ssh, -p, "2222", me@build1], max_parallel: 6},\n'
                    '        gpu.box: {ssh: [ssh, gpu], handoff: [~/.local/bin/handoff]}}\n'
                    'placement: auto\n')
    found = load(home, project)
    assert list(found.hosts) == ["build1", "gpu.box"] and found.placement == "auto"
    assert found.host("build1") == Host("build1", ("ssh", "-p", "2222", "me@build1"), 6)
    assert found.host("gpu.box").handoff == ("~/.local/bin/handoff",)
    with pytest.raises(UsageError, match="no host 'nope'"):
        found.host("nope")
    bad = {
        "hosts: {build1: {ssh: [ssh, -A, me@b]}}": "asks for -A \\(agent forwarding\\)",
        "hosts: {build1: {ssh: [ssh, me@b, -X]}}": "must end with the destination",
        "hosts: {build1: {ssh: [ssh]}}": "must end with the destination",
        "hosts: {build1: {ssh: ssh me@b}}": "must be a list of non-empty strings",
        "hosts: {local: {ssh: [ssh, me@b]}}": "is not a host name",
        "hosts: {Build: {ssh: [ssh, me@b]}}": "is not a host name",
        "hosts: {build1: {ssh: [ssh, me@b], port: 22}}": "unknown key",
        "hosts: {build1: {max_parallel: 2}}": "needs 'ssh'",
        "hosts: {build1: {ssh: [ssh, me@b], max_parallel: 0}}": "max_parallel",
        "placement: anywhere": "'placement' is one of local, auto",
    }
    for text, said in bad.items():
        user_file(home, text + "\n")
        with pytest.raises(UsageError, match=said):
            load(home, project)
    user_file(home, "")
    repo_file(project, "hosts: {build1: {ssh: [ssh, me@b]}}\n")
    with pytest.raises(UsageError, match="'hosts' is this machine's, not a repository's"):
        load(home, project)

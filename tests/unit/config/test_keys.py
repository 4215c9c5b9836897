"""handoff.config.keys: one row a key, every field of Config a row; a bad value names the file
and the key; this machine's keys come from the person's own file alone."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from handoff.config import PEER_NICE, Config, load
from handoff.config.keys import KEYS
from handoff.errors import UsageError
from tests.configfiles import refused, repo_file, user_file


def test_every_field_of_config_is_a_row_of_the_table_in_its_order() -> None:
    assert list(KEYS) == [f.name for f in fields(Config)]


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
    ("start_timeout: 0\n", "start_timeout"),
    ("stall_timeout: never\n", "stall_timeout"),
    ("turn_grace: -1\n", "turn_grace"),
    ("env_allow: [CODEX_SESSION_ID]\n", "CODEX_SESSION_ID"),
    ("env_allow: [CLAUDE_CODE_MESSAGING_TOKEN]\n", "CLAUDE_CODE_MESSAGING_TOKEN"),
    ("post_create: make setup\n", "post_create"),
    ("post_create:\n  - make setup\n", "post_create[0]"),
    ("post_create:\n  - [make]\n  - [make, 3]\n", "post_create[1]"),
    ("post_create:\n  - [make, '']\n", "post_create[0]"),
    ("env_allow: HTTP_PROXY\n", "env_allow"),
    ("env_allow: [HTTP_PROXY, 1]\n", "env_allow"),
    ("max_round: 3\n", "max_round"),
    ("test: ''\n", "test"),
    ("test: [pytest, 3]\n", "test"),
    ("test: \"pytest 'unclosed\"\n", "test"),
    ("providers: {implementer: claude}\n", "providers"),
]


@pytest.mark.parametrize("which", ["user", "repo"])
@pytest.mark.parametrize(("text", "key"), BAD_VALUES)
def test_a_bad_value_names_the_file_and_the_key(text: str, key: str, which: str, home: Path,
                                          project: Path) -> None:
    assert key in refused(home, project, which, text)


def test_an_unknown_key_hints_at_the_known_ones(home: Path, project: Path) -> None:
    repo_file(project, "max_round: 3\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert "max_rounds" in caught.value.hint


@pytest.mark.parametrize("text", ["- max_rounds\n- 3\n", "just a string\n", "42\n"])
def test_a_top_level_that_is_not_a_mapping_names_the_file(text: str, home: Path, project: Path) -> None:
    path = user_file(home, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message


def test_timings_are_read(home: Path, project: Path) -> None:
    repo_file(project, "start_timeout: 30\nstall_timeout: 600\nturn_grace: 2.5\n")
    config = load(home, project)
    assert (config.start_timeout, config.stall_timeout, config.turn_grace) == (30, 600, 2.5)


def test_the_longest_timeout_is_thirty_days(home: Path, project: Path) -> None:
    repo_file(project, "gate_timeout: 2592000\nstall_timeout: 0.5\n")
    config = load(home, project)
    assert config.gate_timeout == 2592000.0 and config.stall_timeout == 0.5


def test_an_empty_post_create_command_is_refused(home: Path, project: Path) -> None:
    path = repo_file(project, "post_create:\n  - []\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert "post_create[0]" in caught.value.message


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


def test_this_machines_keys_are_refused_in_a_repositorys_file_before_their_value_is_read(
        home: Path, project: Path) -> None:
    assert {key for key, row in KEYS.items() if row.personal} == {
        "max_parallel", "peer_nice", "hosts", "placement"}
    user_file(home, "max_parallel: 2\npeer_nice: 3\nplacement: auto\n")
    found = load(home, project)
    assert (found.max_parallel, found.peer_nice, found.placement) == (2, 3, "auto")
    for key in ("max_parallel", "peer_nice", "hosts", "placement"):
        path = repo_file(project, f"{key}: [not, a, value, of, it]\n")
        with pytest.raises(UsageError) as caught:
            load(home, project)
        assert caught.value.message == (f"{path}: '{key}' is this machine's, not a repository's: "
                                        "it is about every ticket this machine runs")
        assert caught.value.hint == ("put it in $HANDOFF_HOME/config.yaml (handoff doctor names "
                                     "that file)")


@pytest.mark.parametrize("text", ["test: python -m pytest -q\n",
                                  "test: [python, -m, pytest, -q]\n"])
def test_the_repositorys_test_command_is_a_command_line_or_a_list(text: str, home: Path,
                                                                   project: Path) -> None:
    repo_file(project, text)
    assert load(home, project).test == ("python", "-m", "pytest", "-q")
    assert Config().test == (), "none unless the repository says"

"""handoff.config.loading: the files in force (the user's, then the repo's over it), what each
setting's file is, YAML and text errors naming the file, and the template `init` writes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from handoff.config import REPO_CONFIG, Config, config_template, files, load, set_in, settings
from handoff.errors import UsageError
from handoff.inputs import CONFIG_LIMIT
from tests.configfiles import repo_file, user_file


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


def test_the_files_are_the_users_then_the_repos_and_a_setting_names_the_last_that_sets_it(
        home: Path, project: Path) -> None:
    assert files(home, project) == [] and settings(home, project) == []
    user = user_file(home, "max_rounds: 5\ngate_timeout: 60\nturn_grace: 5\n")
    assert files(home, project) == [user]
    repo = repo_file(project, "max_rounds: 4\n")
    assert files(home, project) == [user, repo] and files(home, None) == [user]
    # turn_grace: 5 is the default: not a setting of its own
    assert settings(home, project) == [("max_rounds", 4, repo), ("gate_timeout", 60.0, user)]


def test_a_bad_repo_file_is_reported_even_when_the_user_file_is_fine(home: Path, project: Path) -> None:
    user_file(home, "max_rounds: 4\n")
    path = repo_file(project, "max_rounds: 0\n")
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert str(home / "config.yaml") not in caught.value.message


@pytest.mark.parametrize("text", ["max_rounds: [3\n", "a: b: c\n", "key: 'unclosed\n", "\tmax_rounds: 3\n"])
def test_invalid_yaml_names_the_file(text: str, home: Path, project: Path) -> None:
    path = repo_file(project, text)
    with pytest.raises(UsageError) as caught:
        load(home, project)
    assert str(path) in caught.value.message
    assert "YAML" in caught.value.message


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


def test_the_init_template_offers_a_security_reviewer_on_a_second_cli(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    assert config_template(repo, "claude", "codex", "codex") is not None
    config = load(tmp_path / "home", repo)
    assert config.team.reviewers == ("reviewer", "security")
    assert (config.roles["security"].provider, config.roles["security"].focus) == \
        ("codex", "security")


def test_a_fix_names_the_file_that_sets_the_key_now(home: Path, project: Path) -> None:
    """A hint says "raise stall_timeout in FILE": the file whose value is in force, not
    always the repository's."""
    assert set_in(home, project, "stall_timeout") == project / REPO_CONFIG, "set nowhere yet"
    user_file(home, "stall_timeout: 600\n")
    assert set_in(home, project, "stall_timeout") == home / "config.yaml"
    repo_file(project, "stall_timeout: 900\nmax_rounds: 2\n")
    assert set_in(home, project, "stall_timeout") == project / REPO_CONFIG, "the later wins"
    assert set_in(home, None, "max_rounds") == home / "config.yaml", "no repository: theirs"

"""handoff.config.sections: the keys with a structure of their own (hosts, sandbox, scanners,
share), each error naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.config import Host, Share, load
from handoff.errors import UsageError
from tests.configfiles import refused, repo_file, user_file


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


BAD_SECTIONS = [
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
    ("share: .venv\n", "share"),
    ("share:\n  - {mode: copy}\n", "share[0]"),
    ("share:\n  - .venv\n  - 7\n", "share[1]"),
    ("share:\n  - /etc\n", "share[0]"),
    ("share:\n  - ../outside\n", "share[0]"),
    ("share:\n  - {path: .venv, mode: hardlink}\n", "share[0]"),
]


@pytest.mark.parametrize("which", ["user", "repo"])
@pytest.mark.parametrize(("text", "key"), BAD_SECTIONS)
def test_a_bad_section_names_the_file_and_the_key(text: str, key: str, which: str, home: Path,
                                            project: Path) -> None:
    assert key in refused(home, project, which, text)


def test_scanners_are_read_with_their_defaults(home: Path, project: Path) -> None:
    repo_file(project, "scanners:\n"
                       "  - {name: gitleaks, command: [gitleaks, detect, '--log-opts={diff_range}']}\n"
                       "  - {name: bandit, command: [bandit, -q, '{changed_py_files}'], "
                       "required: false}\n")
    found = load(home, project).scanners
    assert [(s.name, s.command, s.required) for s in found] == [
        ("gitleaks", ("gitleaks", "detect", "--log-opts={diff_range}"), True),
        ("bandit", ("bandit", "-q", "{changed_py_files}"), False)]


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


def test_a_repository_may_tighten_the_sandbox_never_open_it(home: Path, project: Path) -> None:
    user_file(home, "sandbox: {mode: auto, write: [~/.cache/pip]}\n")
    repo_file(project, "sandbox: {mode: on, hide: [/srv/secrets]}\n")
    box = load(home, project).sandbox
    assert (box.mode, box.write, box.hide) == ("on", ("~/.cache/pip",), ("/srv/secrets",))
    assert box.paths("write") == [Path.home() / ".cache" / "pip"]
    for opened, said in (("sandbox: off", "sandbox: off is only taken from your own config"),
                         ("sandbox: {write: [/srv/x]}", "sandbox.write is only taken from")):
        repo_file(project, opened + "\n")
        with pytest.raises(UsageError, match=said):
            load(home, project)
    repo_file(project, "sandbox: {hide: [srv]}\n")
    with pytest.raises(UsageError, match=r"sandbox\.hide: 'srv' is not an absolute path"):
        load(home, project)
    repo_file(project, "")
    user_file(home, "sandbox: off\n")  # YAML reads a bare off as false
    assert load(home, project).sandbox.mode == "off"

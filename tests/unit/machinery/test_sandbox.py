"""handoff.machinery.sandbox: a fence's layout, and real bubblewrap runs of it, as the user the
tests run as and as an unprivileged user the suite creates (people run handoff as themselves,
CI as root)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from handoff.machinery.sandbox import (
    HIDE,
    READ,
    WRITE,
    Fence,
    credentials,
    support,
    userns_fix,
)


def test_rules_are_laid_out_shallow_to_deep_and_the_last_rule_for_a_path_wins(
        tmp_path: Path) -> None:
    home, ticket, drafts = tmp_path / "home", tmp_path / "home" / "t", tmp_path / "home" / "t" / "d"
    drafts.mkdir(parents=True)
    fence = Fence(tmp_path).with_rules(WRITE, [drafts]).with_rules(READ, [ticket]).with_rules(
        HIDE, [home, tmp_path / "missing"]).with_rules(WRITE, [home])
    assert fence.laid_out() == [(WRITE, home), (READ, ticket), (WRITE, drafts)]


def test_the_credentials_list_names_the_usual_keys_and_agent_sockets(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/4242")
    hidden = credentials(Path("/home/ann"))
    for path in ("/home/ann/.ssh", "/home/ann/.aws", "/home/ann/.config/gcloud",
                 "/home/ann/.config/gh", "/home/ann/.netrc", "/home/ann/.git-credentials",
                 "/home/ann/.docker", "/home/ann/.kube", "/home/ann/.gnupg", "/run/user/4242"):
        assert Path(path) in hidden


def test_without_bubblewrap_on_path_support_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    found = support()  # the cache is keyed by the bwrap found: none on this PATH
    assert not found.available and "not installed" in found.why
    assert "apt install bubblewrap" in found.fix
    assert "sysctl" in userns_fix() or "user namespaces" in userns_fix()


def layout(root: Path) -> tuple[Fence, Path, Path, Path]:
    """A worktree the fence writes, a home it reads, a key it hides."""
    work, home = root / "work", root / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE\n")
    (home / "notes.txt").write_text("mine\n")
    work.mkdir()
    fence = Fence(work).with_rules(READ, [home]).with_rules(
        HIDE, credentials(home)).with_rules(WRITE, [work])
    return fence, work, home, home / "notes.txt"


@pytest.fixture(scope="module")
def unprivileged() -> Iterator[int]:
    """A user of its own, made for these tests and removed after (or the user the tests run as
    when they do not run as root)."""
    if os.geteuid() != 0:
        yield os.geteuid()
        return
    name = f"hsbx{uuid.uuid4().hex[:8]}"
    useradd = shutil.which("useradd")
    assert useradd, "useradd is needed to make an unprivileged user for the sandbox tests"
    subprocess.run([useradd, "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=30)
    try:
        yield pwd.getpwnam(name).pw_uid
    finally:
        subprocess.run([shutil.which("userdel") or "userdel", name], capture_output=True,
                       timeout=30)


def test_a_path_the_fence_would_hide_is_named_with_why() -> None:
    """The deepest rule over a path decides; with none, the private /tmp covers what is
    under /tmp. (Paths only: nothing is looked at but their names.)"""
    home = Path("/home/someone")
    fence = Fence(home).with_rules(READ, [home, Path("/tmp/shown")]).with_rules(
        HIDE, [home / ".ssh"]).with_rules(WRITE, [home / ".ssh" / "public"])
    assert fence.hides("/tmp/tools/agent.sh") == \
        "/tmp/tools/agent.sh is under /tmp, which the sandbox replaces by a private one"
    assert fence.hides("/tmp/shown/agent.sh") == "", "a rule shows it again"
    assert fence.hides(home / ".ssh" / "bin" / "x") == \
        f"{home / '.ssh' / 'bin' / 'x'} is under {home / '.ssh'}, which the sandbox hides"
    assert fence.hides(home / ".ssh" / "public" / "x") == "", "the deeper rule wins"
    assert fence.hides(home / "bin" / "tool") == "" and fence.hides("/usr/bin/env") == ""

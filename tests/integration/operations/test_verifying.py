"""handoff.operations.verifying: a passed ticket's evidence bundle checked by `handoff verify`: with
one byte changed, a member added, from another key, and its gate run again in a fresh fenced
checkout of a clean clone (the bundle as made: tests/integration/loop/test_evidence.py). Real
git, tmux and scripted agents."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from tests.conftest import git
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    assert_clean_error,
    events,
    handoff,
    plan_text,
    ticket_path,
    write_plan,
)


def rewritten(bundle: Path, to: Path, name: str, change: bytes = b"", byte: int = -1) -> Path:
    """A copy of bundle with one member's byte flipped (or `change` appended)."""
    members: list[tuple[tarfile.TarInfo, bytes]] = []
    with tarfile.open(bundle) as tar:
        for member in tar:
            data = tar.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == name:
                data = data + change if change else \
                    data[:byte] + bytes([data[byte] ^ 1]) + data[byte + 1:]
                member.size = len(data)
            members.append((member, data))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for member, data in members:
            tar.addfile(member, io.BytesIO(data))
    to.write_bytes(out.getvalue())
    return to


@pytest.fixture
def passed(repo: Path, tmp_path: Path, handoff_home: Path) -> Path:
    """E-1 passed; its bundle."""
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY,
                                          review=[ADD_ONLY]))
    done = handoff("start", "E-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    [event] = [e for e in events(handoff_home, "E-1") if e["kind"] == "evidence"]
    bundle: Path = ticket_path(handoff_home, "E-1") / str(event["bundle"])
    assert bundle.is_file() and event["signer"].startswith("sha256:")
    return bundle


def test_one_changed_byte_or_another_key_is_refused_naming_what(
        repo: Path, tmp_path: Path, handoff_home: Path, passed: Path) -> None:
    diff = rewritten(passed, tmp_path / "diff.tar", "change.diff", byte=40)
    assert_clean_error(handoff("verify", str(diff), cwd=repo), 1,
                       "change.diff in diff.tar was changed after it was signed")
    head = rewritten(passed, tmp_path / "head.tar", "manifest.json", byte=20)
    assert_clean_error(handoff("verify", str(head), cwd=repo), 1,
                       "the manifest does not match its signature")
    extra = tmp_path / "extra.tar"
    with tarfile.open(passed) as tar, tarfile.open(extra, "w") as out:
        for member in tar:
            out.addfile(member, tar.extractfile(member))
        info = tarfile.TarInfo("run-me.sh")
        info.size = 3
        out.addfile(info, io.BytesIO(b"id\n"))
    assert_clean_error(handoff("verify", str(extra), cwd=repo), 1,
                       "holds run-me.sh, which its signed manifest does not list")

    other = {**os.environ, "HANDOFF_HOME": str(tmp_path / "other-home")}
    refused = handoff("verify", str(passed), cwd=repo, env=other)
    assert_clean_error(refused, 1, "is signed by another key", "--key FILE")
    theirs = handoff("verify", str(passed), "--key",
                     str(handoff_home / "keys" / "evidence.pub"), cwd=repo, env=other)
    assert theirs.returncode == 0, theirs.stderr
    assert_clean_error(handoff("verify", str(tmp_path / "diff.tar.none"), cwd=repo), 2,
                       "cannot read the bundle")


def test_rerun_runs_the_gate_again_in_a_fresh_fenced_checkout_of_a_clean_clone(
        repo: Path, tmp_path: Path, handoff_home: Path, passed: Path) -> None:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-local", str(repo), str(clone))
    git(clone, "fetch", "-q", "origin", "handoff/E-1")
    done = handoff("verify", str(passed), "--rerun", "--repo", str(clone), cwd=tmp_path,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rerun: `" in done.stdout and "passed in" in done.stdout
    assert "in a fresh fenced checkout" in done.stdout
    assert not (clone / ".worktrees").exists() or not any((clone / ".worktrees").iterdir()), \
        "the checkout it made is gone"
    assert not any((handoff_home / "reruns").iterdir())
    # where the commit is not there, the change is said unchecked, and a rerun refused
    elsewhere = tmp_path / "elsewhere"
    git(tmp_path, "init", "-q", str(elsewhere))
    git(elsewhere, "commit", "-q", "--allow-empty", "-m", "x")
    unchecked = handoff("verify", str(passed), "--repo", str(elsewhere), cwd=tmp_path)
    assert unchecked.returncode == 0 and "was not checked against a repository" in \
        unchecked.stderr, unchecked.stderr
    assert_clean_error(handoff("verify", str(passed), "--rerun", "--repo", str(elsewhere),
                               cwd=tmp_path), 2, "the gate cannot be run again")

"""handoff.machinery.sandbox: a fence's layout, and real bubblewrap runs of it, as the user the
tests run as and as an unprivileged user the suite creates (people run handoff as themselves,
CI as root)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from handoff.machinery.sandbox import (
    Fence,
    support,
    userns_fix,
    wrap,
)
from tests.unit.machinery import test_sandbox as unit_tests
from tests.unit.machinery.test_sandbox import layout

#: the fixtures this module's unit tests define, shared
unprivileged = unit_tests.unprivileged


def test_support_probes_once_per_bubblewrap_and_again_when_it_changes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    fake = tmp_path / "bwrap"
    fake.write_text(f"#!/bin/sh\necho run >> {runs}\nexit 0\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    first, second = support(), support()
    assert first.available and first.bwrap == str(fake) and second == first
    assert runs.read_text(encoding="utf-8").count("run") == 1
    fake.write_text(f"#!/bin/sh\necho run >> {runs}\necho no userns >&2\nexit 1\n",
                    encoding="utf-8")  # a new binary (size, mtime): probed again
    third = support()
    assert not third.available and "no userns" in third.why
    assert runs.read_text(encoding="utf-8").count("run") == 2


def run_fenced(fence: Fence, script: str,
               user: int | None = None) -> subprocess.CompletedProcess[str]:
    found = support()
    assert found.available, f"the sandbox tests need bubblewrap: {found.why} ({found.fix})"
    argv = wrap(found.bwrap, fence, ["sh", "-c", script])
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, user=user,
                          stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "HOME": "/"})


CHECKS = """
set -u
echo made > made.txt && echo wrote-worktree
cat {home}/.ssh/id_ed25519 2>/dev/null && echo read-key
echo lost > {notes} 2>/dev/null && echo wrote-home
echo x > /tmp/{scratch} && echo wrote-tmp
ls /proc | grep -c '^[0-9]' | sed 's/^/processes=/'
"""


def judged(done: subprocess.CompletedProcess[str]) -> set[str]:
    return {line.strip() for line in done.stdout.splitlines()}


def test_a_fenced_command_writes_its_worktree_and_nothing_of_the_home(tmp_path: Path) -> None:
    fence, work, home, notes = layout(tmp_path)
    scratch = f"handoff-scratch-{uuid.uuid4().hex}"
    done = run_fenced(fence, CHECKS.format(home=home, notes=notes, scratch=scratch))
    said = judged(done)
    assert "wrote-worktree" in said and (work / "made.txt").read_text() == "made\n", done.stderr
    assert "read-key" not in said and "wrote-home" not in said
    assert "wrote-tmp" in said and not (Path("/tmp") / scratch).exists(), "a private /tmp"
    assert notes.read_text() == "mine\n"
    assert int(next(s for s in said if s.startswith("processes=")).split("=")[1]) <= 5


def test_the_same_fence_holds_for_an_unprivileged_user(unprivileged: int) -> None:
    # outside pytest's temp tree, which only its own user may enter
    root = Path(tempfile.mkdtemp(prefix="handoff-sandbox-", dir="/tmp"))
    try:
        root.chmod(0o755)
        fence, work, home, notes = layout(root)
        for path in (work, home, home / ".ssh", home / ".ssh" / "id_ed25519", notes):
            os.chown(path, unprivileged, unprivileged)
        done = run_fenced(fence, CHECKS.format(home=home, notes=notes, scratch="x"),
                          user=unprivileged)
        said = judged(done)
        assert "wrote-worktree" in said, (done.stdout, done.stderr, userns_fix())
        assert (work / "made.txt").stat().st_uid == unprivileged
        assert "read-key" not in said and "wrote-home" not in said
        assert notes.read_text() == "mine\n"
        assert int(next(s for s in said if s.startswith("processes=")).split("=")[1]) <= 5
    finally:
        shutil.rmtree(root, ignore_errors=True)


FILL = """
for where in /tmp {hidden}; do
  if head -c 2097152 /dev/zero > $where/fill 2>/dev/null; then echo "$where=all"
  else echo "$where=$(stat -c %s $where/fill)"; fi
done
"""


@pytest.mark.parametrize("as_user", [False, True], ids=["as-is", "unprivileged"])
def test_the_fence_s_own_folders_hold_at_most_tmp_bytes(as_user: bool,
                                                        request: pytest.FixtureRequest) -> None:
    """A tmpfs is memory: the private /tmp and every hidden folder's empty stand-in (TMPDIR
    among them) are capped (`sandbox.limits.tmp`), and without a cap take what is written."""
    user = request.getfixturevalue("unprivileged") if as_user else None
    root = Path(tempfile.mkdtemp(prefix="handoff-sandbox-", dir="/tmp"))
    try:
        root.chmod(0o755)
        fence, work, home, _ = layout(root)
        if user is not None:  # its own, whatever the umask of this process (0077 after a
            for path in (work, home, home / ".ssh"):  # ticket was opened in it)
                os.chown(path, user, user)
        hidden = home / ".ssh"
        found = support()
        assert found.sized, "bubblewrap 0.8 takes --size"
        script = FILL.format(hidden=hidden)
        capped = subprocess.run(wrap(found.bwrap, fence, ["sh", "-c", script], tmp=1 << 20),
                                capture_output=True, text=True, timeout=30, user=user)
        assert judged(capped) == {f"/tmp={1 << 20}", f"{hidden}={1 << 20}"}, capped.stderr
        free = subprocess.run(wrap(found.bwrap, fence, ["sh", "-c", script]),
                              capture_output=True, text=True, timeout=30, user=user)
        assert judged(free) == {"/tmp=all", f"{hidden}=all"}, free.stderr
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_bubblewrap_without_size_still_fences_uncapped(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text('#!/bin/sh\ncase "$*" in *--size*) echo "bwrap: Unknown option --size" >&2; '
                    "exit 1;; esac\nexit 0\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    found = support()
    assert found.available and not found.sized
    args = wrap(found.bwrap, Fence(tmp_path), ["true"], tmp=5 << 20)
    assert args[args.index("--tmpfs") - 2:args.index("--tmpfs")] == ["--size", str(5 << 20)]


def test_a_fenced_process_cannot_leave_its_cgroups(tmp_path: Path) -> None:
    """The limits hold a peer only while it stays in its cgroups: as root it owns their files,
    so the read-only mount of /sys/fs/cgroup is what keeps it there (the cap drop does not:
    the files are its own)."""
    fence, _, _, _ = layout(tmp_path)
    mine = Path("/proc/self/cgroup").read_text()
    leave = ("for f in /sys/fs/cgroup/*/cgroup.procs /sys/fs/cgroup/cgroup.procs; do "
             "[ -e $f ] && echo 0 2>/dev/null > $f && echo moved $f; done; cat /proc/self/cgroup")
    done = run_fenced(fence, leave)
    assert "moved" not in done.stdout, done.stdout
    assert done.stdout.strip().splitlines() == mine.strip().splitlines(), done.stdout

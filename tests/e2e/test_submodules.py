"""A repository with a submodule, as people have them: every checkout handoff makes gets the
submodule's files (set up in the setup's sandbox, as post_create is), and build output inside
the submodule is nobody's work (it never makes `submit` refuse a worktree as not clean)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import commit_file, git
from tests.harness import ADD_ONLY, FIX_ADD, handoff, plan_text, state, ticket_path, write_plan


def with_a_submodule(repo: Path, home: Path) -> None:
    """repo gets lib/ as a submodule of a repository under the person's home (which the
    sandbox shows, read-only), its own build output made by post_create."""
    source = home / "lib-src"
    source.mkdir()
    git(source, "init", "-q", "-b", "main")
    commit_file(source, "helper.py", "VALUE = 42\n", "the library")
    # a local path is a `file` transport, which git refuses for submodules unless allowed
    subprocess.run(["git", "config", "--global", "protocol.file.allow", "always"], check=True,
                   timeout=30)
    git(repo, "submodule", "add", "-q", str(source), "lib")
    (repo / ".handoff.yaml").write_text(json.dumps(
        {"post_create": [["sh", "-c", "mkdir -p lib/build && echo built > lib/build/out"]]}),
        encoding="utf-8")
    git(repo, "add", ".handoff.yaml")
    git(repo, "commit", "-q", "-m", "the library as a submodule")


def test_a_repository_with_a_submodule_gets_it_in_every_checkout_and_passes(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str]) -> None:
    with_a_submodule(repo, Path(isolated["HOME"]))
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY))
    done = handoff("start", "S-1", "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    final = state(handoff_home, "S-1")
    assert done.returncode == 0 and final["phase"] == "passed", \
        (final.get("reason"), done.stdout[-2000:], done.stderr[-2000:])
    for name in ("implementer", "reviewer"):
        checkout = Path(str(final["worktrees"][name]))
        assert (checkout / "lib" / "helper.py").read_text() == "VALUE = 42\n", name
        assert (checkout / "lib" / "build" / "out").is_file(), "its setup's build output"
    events = (ticket_path(handoff_home, "S-1") / "events.jsonl").read_text()
    assert "not clean" not in events, "the submodule's build output is no one's work"

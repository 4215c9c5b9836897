"""A ticket's checkouts as handoff knows them: which of its folders are worktrees of the
repository, what handoff recorded of each, and handoff's own git in one.

A peer may write its worktree and (the implementer and testers, who commit) its worktree's
git admin folder (`<common>/worktrees/<name>`), whose `commondir` file tells git where the
configuration and hooks live. So nothing handoff runs in a checkout is steered by those files:

* handoff's own git there is pinned (`pinned_git`): GIT_DIR is the admin folder handoff
  recorded when it made the worktree, GIT_COMMON_DIR the repository's own, GIT_WORK_TREE the
  folder; the `.git` file, `commondir` and `gitdir` are never followed. Configuration then
  comes only from what the person owns (system, global, the repository's config, which no
  fence lets a peer write; `config.worktree` is read-only in every fence:
  handoff.loop.fences), and no hook or fsmonitor program runs for it (a person's
  post-checkout hook would otherwise run on a peer's files with the person's rights).
* what handoff keeps about a worktree (who made it, its admin folder, its setup) lives beside
  git's records in the common dir (repo_worktrees.RECORDS), never in the admin folder a peer
  writes.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from handoff.errors import NotFound, Tampered
from handoff.machinery.admin_files import digest_of, read_pointer, real_dir, same_path
from handoff.machinery.repo import Repo, load_gitpython
from handoff.machinery.repo_worktrees import RECORDS, WORKTREES_DIR
from handoff.machinery.worktree_lock import repo_lock
from handoff.record.store import atomic_write_json

#: what older releases kept in a worktree's admin folder (read, never trusted for setup)
LEGACY_OWNER_FILE = "handoff-owner.json"
#: what handoff's own git calls on a ticket's checkouts run with: no hook and no fsmonitor
#: program (a person's hooks may run what a checkout's files say: pre-commit, husky; `worktree
#: add` runs post-checkout on the commit it checks out)
QUIET_CONFIG = {"core.hooksPath": "/dev/null", "core.fsmonitor": "false"}


def quiet_env() -> dict[str, str]:
    """QUIET_CONFIG as git's environment (GIT_CONFIG_COUNT…), after any the person set."""
    try:
        count = int(os.environ.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    env = {"GIT_CONFIG_COUNT": str(count + len(QUIET_CONFIG))}
    for i, (key, value) in enumerate(QUIET_CONFIG.items(), start=count):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    return env


@dataclass(frozen=True)
class Checkouts:
    """The checkouts of one ticket, under <repo>/.worktrees/<ticket>/<name>."""

    repo: Repo
    ticket: str

    @property
    def root(self) -> Path:
        return self.repo.top / WORKTREES_DIR / self.ticket

    def path(self, role: str) -> Path:
        return self.root / role

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return repo_lock(self.repo.common_dir)

    # ---- handoff's records, beside git's ---------------------------------------------------
    def record_file(self, name: str) -> Path:
        return self.repo.common_dir / RECORDS / "worktrees" / self.ticket / f"{name}.json"

    def record(self, name: str) -> dict[str, object]:
        """What handoff wrote of the worktree name when it made it ({}: nothing, e.g. one an
        older release made)."""
        try:
            data = json.loads(self.record_file(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def write_record(self, name: str, data: Mapping[str, object]) -> None:
        atomic_write_json(self.record_file(name), data)

    def update_record(self, name: str, **fields: Any) -> None:
        self.write_record(name, {**self.record(name), **fields})

    def drop_record(self, name: str) -> None:
        self.record_file(name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.record_file(name).parent.rmdir()  # the ticket's last one

    def owner(self, path: Path) -> dict[str, str]:
        """Which handoff made this worktree: its HANDOFF_HOME and ticket ({} for a worktree an
        older release made and did not say so)."""
        data = self.record(path.name) if path.parent == self.root else {}
        if not data:
            admin = self.admin_dir(path)
            legacy = read_pointer(admin / LEGACY_OWNER_FILE) if admin is not None else None
            try:
                data = json.loads(legacy) if legacy else {}
            except ValueError:
                data = {}
        return {k: v for k, v in data.items() if k in ("home", "ticket") and isinstance(v, str)} \
            if isinstance(data, dict) else {}

    # ---- is it a worktree? ----------------------------------------------------------------
    def admin_dir(self, path: Path) -> Path | None:
        """The worktree's own git dir (<common>/worktrees/<name>): the one handoff recorded when
        it made it, and what its `.git` file names (read without following a link). None when
        path's `.git` names none of this repository's, or not the recorded one."""
        said = read_pointer(path / ".git")
        if said is None or not said.startswith("gitdir:"):
            return None
        named = Path(os.path.normpath(said[len("gitdir:"):].strip()))
        folder = self.repo.common_dir / "worktrees"
        if not named.is_absolute() or named.name in ("", ".", "..") or not \
                same_path(str(named.parent), folder):
            return None
        admin = folder / named.name
        recorded = self.record(path.name).get("admin") if path.parent == self.root else None
        if recorded is not None and recorded != named.name:
            return None
        return admin if real_dir(admin) else None

    def is_live(self, path: Path) -> bool:
        """path is a worktree of this repo: a folder (not a link) whose .git file points to the
        repo's worktrees/<name>, whose gitdir file points back at it. Read without a git
        process and without following a link (this runs before every command in a worktree)."""
        if not real_dir(path):
            return False
        admin = self.admin_dir(path)
        if admin is None:
            return False
        return same_path(read_pointer(admin / "gitdir") or "", path / ".git")

    def live(self, role: str) -> Path:
        """The role's worktree, or a clear error when its folder is not one (any more)."""
        path = self.path(role)
        if not self.is_live(path):
            raise NotFound(f"the {role}'s folder {path} is not a worktree of {self.repo.top} "
                           "(was it deleted or replaced by hand?)",
                           "'handoff resume' makes it again from the ticket's branch")
        return path

    # ---- handoff's own git in one ------------------------------------------------------------
    def pinned_env(self, path: Path) -> dict[str, str]:
        """The environment of handoff's own git in the checkout at path: the git dirs handoff
        knows, never what the checkout's files say; no hook, no fsmonitor. The one file of the
        admin folder git reads as configuration (`config.worktree`, when the repository has
        extensions.worktreeConfig) must be what git made with the worktree: one a peer changed
        (possible only with the sandbox off) is refused, never read."""
        admin = self.admin_dir(path)
        if admin is None or not self.is_live(path):
            raise NotFound(f"{path} is not a worktree of {self.repo.top} (was it deleted or "
                           "replaced by hand?)",
                           "'handoff resume' makes it again from the ticket's branch")
        made = self.record(path.name).get("config_worktree", "") \
            if path.parent == self.root else ""
        found = digest_of(admin / "config.worktree")
        if found != made:
            raise Tampered(
                f"{admin / 'config.worktree'} is not what git made with the worktree {path}: "
                "a peer may have written settings there, so handoff runs no git in it",
                f"look at the file; remove it (or mend it) and run the command again; "
                f"'handoff close {self.ticket} --keep-worktrees' leaves it alone")
        return {"GIT_DIR": str(admin), "GIT_COMMON_DIR": str(self.repo.common_dir),
                "GIT_WORK_TREE": str(path), **quiet_env()}

    def pinned_git(self, path: Path, *args: str, check: bool = True) -> str:
        """git in a checkout handoff made, pinned to its own git dirs (`pinned_env`)."""
        return self.pinned_run(path, *args, check=check)[1].rstrip("\n")

    def pinned_run(self, path: Path, *args: str, check: bool = True) -> tuple[int, str, str]:
        """(status, stdout, stderr) of git in a checkout handoff made, pinned (`pinned_env`)."""
        load_gitpython()
        from handoff.machinery import gitcmd

        return gitcmd.run(path, args, env=self.pinned_env(path), check=check)

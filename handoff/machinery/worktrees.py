"""Git worktrees for a ticket's roles, under <repo>/.worktrees/<TICKET>/<role>.

Every checkout sits detached at the exact commit it works on: the implementer's at the ticket
branch's tip (handoff alone moves branch handoff/<TICKET>, forward, to each commit it accepts:
handoff.machinery.ticket_branch), each tester's, each reviewer's, and the gate's own (`GATE`),
where the verification command and the scanners run. Removal never loses work: a worktree with
uncommitted or untracked files is refused unless forced, the ticket branch is always kept, and
only what git knows as this ticket's worktree is removed. A folder in its place that is not
one is never deleted.

What a peer may have written in a checkout steers none of this: which folder is a worktree,
and handoff's own git in one, are handoff.machinery.checkouts'. Three more guards:

* a worktree is removed by handoff itself, never through `git worktree remove`, which finds
  the worktree by what its admin folder claims.
* git's worktree add/list/prune run under one lock per repository
  (handoff.machinery.worktree_lock).
* the setup of a checkout (shared folders, post_create) runs once per worktree, fenced in like
  the gate when the sandbox is on (handoff.machinery.checkout_setup). Between rounds a detached
  checkout is reset to its commit and everything git does not track is removed but the setup's
  output (see `point`).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypedDict

from handoff.config import Share
from handoff.errors import UsageError, WorkAtRisk
from handoff.machinery.admin_files import digest_of, read_pointer, real_dir
from handoff.machinery.checkout_setup import CheckoutSetup, SetupFence, bytecode_env
from handoff.machinery.checkouts import Checkouts, quiet_env
from handoff.machinery.repo_worktrees import WORKTREES_DIR, registered
from handoff.machinery.ticket_branch import TicketBranch
from handoff.record.store import atomic_write
from handoff.role import IMPLEMENTER, NAME

#: the gate's own checkout, beside the roles' (role.RESERVED keeps the name from a role)
GATE = "gate"


class MadeFields(TypedDict):
    """The fields of a `worktree` event: what making sure of a role's worktree did."""

    path: str
    created: bool
    setup: bool
    displaced: str | None


@dataclass(frozen=True)
class Made:
    """What making sure of a role's worktree did."""

    role: str
    path: Path
    created: bool  # git made it now: it was missing, or its folder was not a worktree
    setup: bool  # its setup ran now (new, or an earlier setup had not completed)
    displaced: Path | None = None  # a filled folder found in its place, moved here intact

    @property
    def changed(self) -> bool:
        return self.created or self.setup

    def fields(self) -> MadeFields:
        return {"path": str(self.path), "created": self.created, "setup": self.setup,
                "displaced": str(self.displaced) if self.displaced else None}


@dataclass(frozen=True)
class TicketWorktrees(Checkouts):
    """A ticket's checkouts (Checkouts: which are worktrees, handoff's git in one), made, set
    up, reset between rounds and removed; its branch (`ticket_branch`) and each checkout's
    setup (`checkout_setup`) through the methods named as before."""

    shares: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()
    #: seconds each post_create command may take (config `setup_timeout`)
    setup_timeout: float = 900.0
    #: the HANDOFF_HOME whose ticket these worktrees are (recorded with each one)
    home: Path | None = None
    #: more environment for a worktree's post_create, by the worktree's name (its ports)
    setup_env: Callable[[str], Mapping[str, str]] | None = None
    #: what runs a post_create command in the sandbox (None: as the person, sandbox off)
    setup_fence: SetupFence | None = None

    @property
    def ticket_branch(self) -> TicketBranch:
        return TicketBranch(self, self.home)

    @property
    def checkout_setup(self) -> CheckoutSetup:
        return CheckoutSetup(self, self.shares, self.post_create, self.setup_timeout,
                             self.setup_env, self.setup_fence)

    # ---- the ticket branch: handoff's alone (TicketBranch) ---------------------------------
    def branch(self) -> str:
        return self.ticket_branch.name

    def branch_tip(self) -> str:
        return self.ticket_branch.tip()

    def branch_record(self) -> Path:
        return self.ticket_branch.record_file()

    def made_branch(self) -> bool:
        return self.ticket_branch.made()

    def foreign_branch(self) -> str:
        return self.ticket_branch.foreign()

    def refuse_foreign_branch(self) -> None:
        self.ticket_branch.refuse_foreign()

    def start_branch(self, base: str) -> str:
        return self.ticket_branch.start(base)

    def advance_branch(self, old: str, new: str) -> str:
        return self.ticket_branch.advance(old, new)

    def merge_in(self, role: str, at: str, commit: str, message: str) -> list[str]:
        return self.ticket_branch.merge_in(role, at, commit, message)

    def keep_commits(self) -> str:
        return self.ticket_branch.keep_commits()

    # ---- setup (CheckoutSetup) -------------------------------------------------------------
    def setup_done(self, path: Path) -> bool:
        return self.checkout_setup.done(path)

    def kept(self, path: Path) -> list[str]:
        return self.checkout_setup.kept(path)

    def bytecode_env(self, role: str) -> dict[str, str]:
        return bytecode_env(role)

    # ---- making them ----------------------------------------------------------------------
    def create_implementer(self, base_commit: str, recreate: bool = False) -> Path:
        return self.ensure(IMPLEMENTER, base_commit, recreate).path

    def create_detached(self, name: str, commit: str, recreate: bool = False) -> Path:
        """A tester's, a reviewer's or the gate's checkout, detached at commit."""
        return self.ensure(name, commit, recreate).path

    def ensure(self, role: str, rev: str, recreate: bool = False) -> Made:
        """Make the role's folder a worktree of this repo whose setup has completed.

        rev: the implementer's base commit (its branch is made there, or its tip taken when
        handoff made it before); for any other checkout the commit it is detached at. A
        worktree found live is kept as it is (a resume).
        recreate: handoff made this worktree before, so a folder in its place that is not one
        was left when it was deleted by hand (and a peer wrote into the path again): it is
        moved aside intact (Made.displaced) and the worktree made again. Without recreate such
        a folder is the user's, and this refuses.
        """
        path = self.path(role)
        displaced = None
        with self.lock():
            created = not self.is_live(path)
            if created:
                displaced = self._clear(path, recreate)
                self._add(path, self.start_branch(rev) if role == IMPLEMENTER else rev)
        setup = not self.setup_done(path)
        if setup:
            self.checkout_setup.run(path)
        return Made(role, path, created, setup, displaced)

    def _clear(self, path: Path, recreate: bool) -> Path | None:
        """Make room for a new worktree at path without deleting anything with content."""
        displaced = None
        if path.is_dir() and not path.is_symlink() and not any(path.iterdir()):
            path.rmdir()  # an empty folder holds nothing to lose
        elif path.exists() or path.is_symlink():
            if not recreate:
                raise UsageError(f"{path} exists and is not a worktree of {self.repo.top}",
                                 "move it out of the way, then try again")
            displaced = path.with_name(f"{path.name}.displaced-"
                                       f"{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}")
            path.rename(displaced)
        if path.name == IMPLEMENTER:
            self.keep_commits()  # its checkout is gone: its commits are not
        self._forget(path)
        self.drop_record(path.name)
        return displaced

    def _forget(self, path: Path) -> None:
        """Drop git's record of a worktree at path whose folder is gone or is not one; nothing
        on disk is touched (prune only drops records whose .git file is missing)."""
        if path.resolve() in registered(self.repo):
            self.repo.git.worktree("prune", env=quiet_env())

    def _add(self, path: Path, rev: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repo.exclude(f"/{WORKTREES_DIR}/")
        # no hook: post-checkout would run on the commit checked out (a peer's, for the
        # gate and the reviewers) with the person's rights
        self.repo.git.worktree("add", "--detach", str(path), rev, env=quiet_env())
        # the admin folder git chose, read now, before any peer could have written its files
        said = read_pointer(path / ".git") or ""
        admin = Path(said[len("gitdir:"):].strip()) if said.startswith("gitdir:") else None
        self.write_record(path.name, {
            "home": str(self.home.resolve()) if self.home is not None else "",
            "ticket": self.ticket, "name": path.name,
            "admin": admin.name if admin is not None else "",
            "config_worktree": digest_of(admin / "config.worktree") if admin else ""})

    # ---- a detached checkout between rounds ---------------------------------------------
    def point(self, name: str, commit: str, scratch: Path | None) -> Made:
        """Make a detached checkout (a tester's, a reviewer's, the gate's) exactly commit, its
        setup kept.

        What the last peer left that git tracks or sees (edits, new files) is saved to
        scratch (None: it is what handoff itself laid there, and is discarded), tracked files
        are set to commit, and every file git does not track is removed, ignored ones too,
        but the setup's output (its .venv or node_modules: post_create runs once per
        worktree, not every round) and the shared folders. So no
        round sees what another round's run of the code under review left: no planted
        conftest.py, no .pyc (nothing writes bytecode here: `bytecode_env`), no cache. A
        folder that is no longer a worktree is made again at commit, and set up again.
        """
        made = self.ensure(name, commit, recreate=True)
        if made.created:
            return made
        path = made.path
        touched = self.dirty(path)
        if touched and (scratch is None or self.save_scratch(path, scratch, touched)):
            self.pinned_git(path, "reset", "--hard", "--quiet")
        # --force: tracked files become the commit's even where a kept file stood in the way
        self.pinned_git(path, "checkout", "--quiet", "--force", "--detach", commit)
        keep = [arg for kept in self.kept(path) for arg in ("-e", _exact_pattern(kept))]
        self.pinned_git(path, "clean", "-ffdqx", *keep)
        return made

    def lay_over(self, name: str, commit: str, paths: list[str]) -> list[str]:
        """Set paths in a detached checkout to their content at commit (a base checkout with
        a change's test files over it: handoff.loop.proof); returns those laid. Only regular
        files are: a link or a submodule the commit holds at one of them is left out. The
        next `point` sets the checkout whole again."""
        if not paths:
            return []
        path = self.path(name)
        listing = self.pinned_git(path, "ls-tree", "-z", commit, "--", *paths)
        regular = [entry.split("\t", 1)[1] for entry in listing.split("\0") if "\t" in entry
                   and entry.split(" ", 1)[0] in ("100644", "100755")]
        if regular:
            self.pinned_git(path, "checkout", "--quiet", commit, "--", *regular)
        return regular

    def save_scratch(self, path: Path, scratch: Path, dirty: list[str] | None = None) -> bool:
        """Write a worktree's uncommitted and untracked changes as a patch; False when clean.
        dirty: its `dirty` entries, when the caller has just read them."""
        if not (self.dirty(path) if dirty is None else dirty):
            return False
        kept = self.kept(path)
        # an ignored path named even in an exclude makes `git add` fail: name only the others
        ignored = set(self.pinned_git(path, "check-ignore", "--no-index", *kept, check=False)
                      .splitlines()) if kept else set()
        self.pinned_git(path, "add", "-A", "--", ".",
                        *[f":(exclude,literal){name}" for name in kept if name not in ignored])
        patch = self.pinned_git(path, "diff", "--cached", "--binary", "HEAD") + "\n"
        # whole or not at all: a full disk must not leave half a patch beside a worktree that
        # is then removed (write_failed stops the removal, naming the file and the mend)
        atomic_write(scratch, patch)
        return True

    def dirty(self, path: Path) -> list[str]:
        """Uncommitted or untracked entries (ignored files and our shared folders aside, and
        what changed inside a submodule's files: its build output is no one's work, and
        handoff's git never enters a submodule, whose git dir the set-up wrote). A folder that
        is not a worktree has none: git holds nothing there, and handoff never removes it."""
        if not self.is_live(path):
            return []
        out = self.pinned_git(path, "status", "--porcelain", "-z", "--untracked-files=all",
                              "--ignore-submodules=dirty")
        shared = set(self.kept(path))
        entries = []
        fields = iter(out.split("\0"))
        for item in fields:
            if item[:1] in ("R", "C"):
                next(fields, None)  # a rename's or copy's source path: not an entry of its own
            name = item[3:].rstrip("/")
            if item and not any(name == s or name.startswith(s + "/") for s in shared):
                entries.append(item)
        return entries

    def head(self, role: str) -> str:
        return self.pinned_git(self.live(role), "rev-parse", "HEAD")

    # ---- removing them --------------------------------------------------------------------
    def ensure_clean(self, roles: tuple[str, ...] = (IMPLEMENTER,)) -> None:
        """Raise WorkAtRisk naming the files when any of these worktrees holds work."""
        for role in roles:
            path = self.path(role)
            dirty = self.dirty(path)
            if dirty:
                listing = ", ".join(e[3:] for e in dirty[:5]) + (" …" if len(dirty) > 5 else "")
                raise WorkAtRisk(
                    f"the {role} worktree {path} has uncommitted or untracked work: {listing}",
                    f"commit or stash it there (cd {path}), or pass --force to discard it; "
                    "--keep-worktrees closes the ticket and leaves the worktrees alone",
                )

    def remove(self, role: str, force: bool = False) -> bool:
        """Remove one role's worktree; False when there was none.

        Only a live worktree of this repo is removed: its folder (a link inside it is removed
        as a link, never followed) and its admin folder, by handoff itself, not by `git
        worktree remove` (which finds a worktree by what its admin folder claims, and that a
        peer may have rewritten). Whatever else stands at its path is left as it is, whatever
        its name: see `left`.
        """
        path = self.path(role)
        with self.lock():
            if role == IMPLEMENTER:
                self.keep_commits()
            if not self.is_live(path):
                self._forget(path)
                return False
            if not force:
                self.ensure_clean((role,))
            admin = self.admin_dir(path)
            shutil.rmtree(path)  # fd-based on Linux: resistant to links planted inside
            if admin is not None and real_dir(admin):
                shutil.rmtree(admin)
            self.drop_record(role)
        return True

    def present(self) -> list[str]:
        """The names of this ticket's live worktrees (the implementer first, the gate's last):
        what handoff made under its folder, whatever roles the ticket had."""
        if not real_dir(self.root):
            return []
        found = sorted(p.name for p in self.root.iterdir()
                       if NAME.fullmatch(p.name) and self.is_live(p))
        return sorted(found, key=lambda name: (name != IMPLEMENTER, name == GATE))

    def remove_all(self, force: bool = False,
                   scratch: Callable[[str], Path] | None = None) -> list[str]:
        """Remove every worktree of the ticket (checking all before removing any); the branch
        stays, with every commit of the implementer's checkout on it (`keep_commits`).

        A detached checkout only ever holds a commit already on the branch, plus what its peer
        or test runs left there: with scratch (a checkout's name → where to keep it), that is
        saved as a patch instead of blocking the removal.
        """
        names = self.present()
        with self.lock():
            self.keep_commits()  # also when its folder was deleted by hand
        detached = [name for name in names if name != IMPLEMENTER]
        if scratch is not None:
            for name in detached:
                self.save_scratch(self.path(name), scratch(name))
        if not force:
            self.ensure_clean(tuple(names) if scratch is None else (IMPLEMENTER,))
        removed = [name for name in names if self.remove(name, force=True)]
        for folder in (self.root, self.root.parent):
            if real_dir(folder) and not any(folder.iterdir()):
                folder.rmdir()
        with self.lock():
            self.repo.git.worktree("prune", with_exceptions=False, env=quiet_env())
        return removed

    def left(self) -> list[Path]:
        """What still stands in the ticket's worktrees folder: not handoff's to delete."""
        return sorted(self.root.iterdir()) if real_dir(self.root) else []


def _exact_pattern(name: str) -> str:
    """An ignore pattern (for git clean -e) matching exactly the path name from the top."""
    return "/" + "".join(f"\\{c}" if c in "\\*?[] !#" else c for c in name)

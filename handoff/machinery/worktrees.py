"""Git worktrees for a ticket's roles, under <repo>/.worktrees/<TICKET>/<role>.

The implementer works on branch handoff/<TICKET>; every other checkout sits detached at the
exact commit it works on: each tester's, each reviewer's, and the gate's own (`GATE`), where
the verification command and the scanners run. Removal never loses work: a worktree with
uncommitted or untracked files is refused unless forced, the ticket branch is always kept,
and only what git knows as this ticket's worktree is removed. A folder in its place that is
not one is never deleted.

Three guards:

* git's worktree add/list/remove/prune run under one lock per repository (`repo_lock`):
  tickets started together made git read another process's half-written worktree.
* every git call inside a role's folder runs with a ceiling just above it: a folder that is
  no longer a worktree (deleted by hand, re-made by a peer) makes git fail, never act on the
  repository around it.
* a worktree's setup (shared folders, post_create) runs once per worktree: it is marked done
  in the worktree's own git dir once it completed, and runs again only on a worktree without
  the mark (a failed post_create, fixed; a worktree made again, whose git dir is new). Between
  rounds the reviewer's checkout is reset to the commit under review and its untracked files
  removed, while the setup's output stays (see `point`).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from handoff.config import Share
from handoff.errors import Busy, ExternalFailure, NotFound, UsageError, WorkAtRisk
from handoff.inputs import clip
from handoff.machinery import proc
from handoff.machinery.proc import git_timeout
from handoff.machinery.repo import Repo, git, git_env, load_gitpython
from handoff.role import IMPLEMENTER, NAME

WORKTREES_DIR = ".worktrees"
#: the gate's own checkout, beside the roles' (role.RESERVED keeps the name from a role)
GATE = "gate"
#: in a worktree's git admin folder: the HANDOFF_HOME and ticket that made it
OWNER_FILE = "handoff-owner.json"
LOCK_FILE = "handoff-worktrees.lock"
SETUP_MARK = "handoff-setup-done"
#: (in the worktree's git dir) what the setup left that git does not ignore, NUL-separated:
#: kept like the shared folders, never taken for a peer's work
SETUP_OUTPUT = "handoff-setup-output"
def bytecode_root() -> Path:
    """The PYTHONPYCACHEPREFIX of the detached checkouts (`bytecode_env`): a cache, so not
    under HANDOFF_HOME, whose disk holds the ticket records (filling it would stop tickets).
    From HOME alone, which every handoff process and peer has: XDG_CACHE_HOME is not in the
    peers' allowlist, and the orchestrator that sets it and the `close` that drops from it
    must name the same folder."""
    return Path.home() / ".cache" / "handoff" / "pycache"


def branch_name(ticket: str) -> str:
    return f"handoff/{ticket}"


# ---- the per-repository lock ------------------------------------------------------------------

_held = threading.local()  # per thread: lock file → how deep it holds it (the lock is re-entrant)


def _depths() -> dict[Path, int]:
    depths: dict[Path, int] | None = getattr(_held, "depths", None)
    if depths is None:
        depths = _held.depths = {}
    return depths


def lock_timeout() -> float:
    """Long enough for a holder's slowest git call (a checkout plus its hooks) and one more."""
    return 2 * git_timeout()


@contextlib.contextmanager
def repo_lock(common_dir: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the repository's worktree lock (an flock in its git common dir, so it dies with
    its holder, however it dies); wait for it at most timeout seconds, then raise Busy."""
    path = common_dir / LOCK_FILE
    depth = _depths()
    if depth.get(path):
        depth[path] += 1
        try:
            yield
        finally:
            depth[path] -= 1
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise ExternalFailure(f"cannot open the worktree lock {path}: {exc.strerror}",
                              "handoff needs to write in the repository's git dir") from None
    try:
        _take(fd, path, lock_timeout() if timeout is None else timeout)
        depth[path] = 1
        try:
            yield
        finally:
            depth.pop(path, None)
    finally:
        os.close(fd)  # drops the flock


def _take(fd: int, path: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                owner = _read_owner(path)
                raise Busy(
                    f"the worktrees of {path.parent} stayed locked for {timeout:g}s by another "
                    f"handoff process ({owner})",
                    "a git command of another ticket is slow or hangs (a hook?); retry once it "
                    "is done ('handoff resume'), or end that process",
                ) from None
            time.sleep(0.02)
            continue
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())  # only to name the holder in that message
        return


def _read_owner(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid unknown"


def registered(repo: Repo) -> set[Path]:
    """Paths of every worktree git knows about for this repo."""
    with repo_lock(repo.common_dir):
        out = repo.git.worktree("list", "--porcelain", "-z")
    return {Path(item[len("worktree "):]).resolve()
            for item in out.split("\0") if item.startswith("worktree ")}


# ---- a ticket's worktrees ---------------------------------------------------------------------

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

    def fields(self) -> dict[str, Any]:
        return {"path": str(self.path), "created": self.created, "setup": self.setup,
                "displaced": str(self.displaced) if self.displaced else None}


@dataclass(frozen=True)
class TicketWorktrees:
    repo: Repo
    ticket: str
    shares: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()
    #: seconds each post_create command may take (config `setup_timeout`)
    setup_timeout: float = 900.0
    #: the HANDOFF_HOME whose ticket these worktrees are (recorded in each one's admin folder)
    home: Path | None = None
    #: more environment for a worktree's post_create, by the worktree's name (its ports)
    setup_env: Callable[[str], Mapping[str, str]] | None = None

    @property
    def root(self) -> Path:
        return self.repo.top / WORKTREES_DIR / self.ticket

    def path(self, role: str) -> Path:
        return self.root / role

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return repo_lock(self.repo.common_dir)

    def _git(self, path: Path, *args: str) -> str:
        """git inside a role's folder, never reaching the repository around it."""
        return git(path, *args, ceiling=path.parent)

    # ---- is it a worktree? ----------------------------------------------------------------
    def admin_dir(self, path: Path) -> Path | None:
        """The worktree's own git dir (<common>/worktrees/<name>) its .git file names, if it
        names one of this repository's."""
        try:
            text = (path / ".git").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        if not text.startswith("gitdir:"):
            return None
        admin = Path(text[len("gitdir:"):].strip())
        admin = (admin if admin.is_absolute() else path / admin).resolve()
        return admin if admin.parent == (self.repo.common_dir / "worktrees").resolve() else None

    def is_live(self, path: Path) -> bool:
        """path is a worktree of this repo: its .git file points to the repo's worktrees/<name>,
        that points back at it, and the checkout found there (as git finds it, read without a
        git process: this runs before every command in a worktree) is path on that admin dir."""
        admin = self.admin_dir(path)
        if admin is None:
            return False
        try:
            back = Path((admin / "gitdir").read_text(encoding="utf-8").strip())
        except (OSError, UnicodeDecodeError):
            return False
        if (back if back.is_absolute() else admin / back).resolve() != (path / ".git").resolve():
            return False
        load_gitpython()
        from handoff.machinery.gitcmd import checkout_at

        return checkout_at(path) == (path.resolve(), admin)

    def live(self, role: str) -> Path:
        """The role's worktree, or a clear error when its folder is not one (any more)."""
        path = self.path(role)
        if not self.is_live(path):
            raise NotFound(f"the {role}'s folder {path} is not a worktree of {self.repo.top} "
                           "(was it deleted or replaced by hand?)",
                           "'handoff resume' makes it again from the ticket's branch")
        return path

    # ---- making them ----------------------------------------------------------------------
    def create_implementer(self, base_commit: str, recreate: bool = False) -> Path:
        return self.ensure(IMPLEMENTER, base_commit, recreate).path

    def create_detached(self, name: str, commit: str, recreate: bool = False) -> Path:
        """A tester's, a reviewer's or the gate's checkout, detached at commit."""
        return self.ensure(name, commit, recreate).path

    def ensure(self, role: str, rev: str, recreate: bool = False) -> Made:
        """Make the role's folder a worktree of this repo whose setup has completed.

        rev: the implementer's base commit (its branch is made from it, or reused when it
        contains it); for any other checkout the commit it is detached at. A worktree found
        live is kept as it is (a resume).
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
                self._add(role, path, rev)
        setup = not self.setup_done(path)
        if setup:
            self._setup(path)
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
        self._forget(path)
        return displaced

    def _forget(self, path: Path) -> None:
        """Drop git's record of a worktree at path whose folder is gone or is not one; nothing
        on disk is touched (prune only drops records whose .git file is missing)."""
        if path.resolve() in registered(self.repo):
            self.repo.git.worktree("prune")

    def _add(self, role: str, path: Path, rev: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repo.exclude(f"/{WORKTREES_DIR}/")
        self.repo.git.worktree("add", *self._add_args(role, path, rev))
        self.record_owner(path)

    def record_owner(self, path: Path) -> None:
        """Which handoff made this worktree (its HANDOFF_HOME and ticket), kept in the
        worktree's own git admin folder, where git keeps it and removes it with the worktree:
        a gc of another HANDOFF_HOME must not take a live ticket's worktree for a stray."""
        admin = self.admin_dir(path)
        if admin is not None and self.home is not None:
            (admin / OWNER_FILE).write_text(json.dumps(
                {"home": str(self.home.resolve()), "ticket": self.ticket}) + "\n",
                encoding="utf-8")

    def owner(self, path: Path) -> dict[str, str]:
        """What record_owner wrote ({} for a worktree an older handoff made)."""
        admin = self.admin_dir(path)
        try:
            data = json.loads((admin / OWNER_FILE).read_text(encoding="utf-8")) if admin else {}
        except (OSError, ValueError):
            return {}
        return {k: v for k, v in data.items() if isinstance(v, str)} \
            if isinstance(data, dict) else {}

    def _add_args(self, role: str, path: Path, rev: str) -> list[str]:
        if role != IMPLEMENTER:
            return ["--detach", str(path), rev]
        branch = branch_name(self.ticket)
        if not self.repo.branch_head(branch):
            return ["-b", branch, str(path), rev]
        if self.repo.is_ancestor(rev, branch):
            return [str(path), branch]
        raise UsageError(
            f"branch {branch} already exists and does not contain the base commit",
            f"delete or rename it ('git branch -m {branch} {branch}-old'), or pick "
            "another ticket id",
        )

    # ---- setup ----------------------------------------------------------------------------
    def setup_done(self, path: Path) -> bool:
        admin = self.admin_dir(path)
        return admin is not None and (admin / SETUP_MARK).is_file()

    def _setup(self, path: Path) -> None:
        """Shared folders and post_create; marked done in the worktree's own git dir only once
        all of it succeeded, so a failure is set up again next time."""
        admin = self.admin_dir(path)
        if admin is None:
            raise NotFound(f"{path} is not a worktree of {self.repo.top}")
        (admin / SETUP_MARK).unlink(missing_ok=True)
        self._share(path)
        made: list[str] = []
        if self.post_create:  # nothing else makes files here: no status to ask without one
            before = set(self._untracked(path))
            self._post_create(path, self.setup_env(path.name) if self.setup_env else {})
            made = [name for name in self._untracked(path) if name not in before]
        (admin / SETUP_OUTPUT).write_text("".join(f"{name}\0" for name in made),
                                          encoding="utf-8")
        (admin / SETUP_MARK).write_text(
            "".join(" ".join(argv) + "\n" for argv in self.post_create), encoding="utf-8")

    def _untracked(self, path: Path) -> list[str]:
        """Untracked entries git does not ignore, a wholly untracked folder as one, shared
        folders aside."""
        out = self._git(path, "status", "--porcelain", "-z", "--untracked-files=normal")
        shared = {s.path.strip("/") for s in self.shares}
        names = [item[3:].rstrip("/") for item in out.split("\0") if item.startswith("?? ")]
        return [n for n in names if not any(n == s or n.startswith(s + "/") for s in shared)]

    def kept(self, path: Path) -> list[str]:
        """What handoff put beside the checkout and keeps there: the shared folders and the
        untracked output of the worktree's setup (its ignored output git keeps by itself)."""
        names = [s.path.strip("/") for s in self.shares]
        admin = self.admin_dir(path)
        if admin is not None:
            with contextlib.suppress(OSError, UnicodeDecodeError):  # none recorded (yet)
                text = (admin / SETUP_OUTPUT).read_text(encoding="utf-8")
                names += [name for name in text.split("\0") if name]
        return names

    def bytecode_env(self, role: str) -> dict[str, str]:
        """Where Python run in a detached checkout (a tester, a reviewer, the gate) keeps its
        bytecode: outside the checkout (see `point` for why), in one folder for every repo and
        ticket, so the standard library and packages are compiled once, not once per worktree
        (that cost ~1.6 s a ticket). The implementer's checkout is its own, never reset by
        handoff: Python keeps its usual __pycache__ there."""
        return {"PYTHONPYCACHEPREFIX": str(bytecode_root())} if role != IMPLEMENTER else {}

    def _share(self, path: Path) -> None:
        for share in self.shares:
            source, target = self.repo.top / share.path, path / share.path
            if not source.exists() or target.exists() or target.is_symlink():
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if share.mode == "symlink":
                target.symlink_to(source, target_is_directory=source.is_dir())
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target)

    def _post_create(self, path: Path, more: Mapping[str, str]) -> None:
        for argv in self.post_create:
            try:
                result = proc.run(argv, cwd=path, timeout=self.setup_timeout, check=False,
                                  env={**os.environ, **more} if more else None)
            except ExternalFailure as exc:  # it hung: ended with every process it started
                raise ExternalFailure(
                    f"post_create command {' '.join(argv)} in {path}: {exc.message}",
                    "make the command finish (or raise setup_timeout in .handoff.yaml), then "
                    "'handoff resume' runs the setup again; the worktree is kept") from None
            if result.returncode != 0:
                tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
                raise ExternalFailure(
                    f"post_create command {' '.join(argv)} failed in {path}: " + " | ".join(tail),
                    "fix the command in .handoff.yaml, then 'handoff resume' runs the setup "
                    "again; the worktree is kept for you to inspect",
                )

    # ---- a detached checkout between rounds ---------------------------------------------
    def point(self, name: str, commit: str, scratch: Path) -> Made:
        """Make a detached checkout (a tester's, a reviewer's, the gate's) exactly commit, its
        setup kept.

        What the last peer left that git tracks or sees (edits, new files) is saved to
        scratch, tracked files are set to commit and untracked ones removed, so no round sees
        another's work; the implementer's never reach this worktree, which only its own peer
        (or the gate) and the setup write in. Ignored files stay: the setup's .venv or node_modules
        (post_create runs once per worktree, not every round) and build caches. Caches that
        trust mtimes are safe after a checkout, which gives every changed file a new one, all
        but Python's bytecode: a .pyc is reused when its source's size and mtime second match,
        and a hash-based one (pip's, compileall's) may not be checked at all. So the peers and
        the gate keep bytecode outside the checkout (`bytecode_env`, not a __pycache__ here,
        which they then never read). There the bytecode of every file the checkout changed
        (or the reviewer had touched) is dropped: a round can come within the second of the
        last, and `a - b` → `a + b` keeps the size. The rest stays; emptying the whole folder
        cost a recompile of the standard library and every package, about a second a round
        (`python -m bench floor`). A folder that is no longer a worktree is made again at
        commit, and set up again.
        """
        made = self.ensure(name, commit, recreate=True)
        if made.created:
            self._drop_bytecode(made.path)  # an earlier worktree's at this path
            return made
        path = made.path
        touched = self.dirty(path)
        before = self._git(path, "rev-parse", "HEAD")
        if self.save_scratch(path, scratch, touched):
            self._git(path, "reset", "--hard", "--quiet")
        # --force: tracked files become the commit's even where a kept file stood in the way
        self._git(path, "checkout", "--quiet", "--force", "--detach", commit)
        keep = [arg for name in self.kept(path) for arg in ("-e", _exact_pattern(name))]
        self._git(path, "clean", "-ffdq", *keep)  # no -x: ignored files stay
        changed = self._git(path, "diff", "--name-only", "-z", before, commit).split("\0")
        self._drop_bytecode(path, [*touched, *changed])
        return made

    def _drop_bytecode(self, path: Path, names: list[str] | None = None) -> None:
        """Remove what `bytecode_env`'s folder holds for these files of the checkout (None:
        for all of it). Python keeps a source's bytecode there under the source's own
        absolute folder."""
        # the folder as Python named it: as found, or resolved
        mirrors = {bytecode_root() / top.relative_to(top.anchor)
                   for top in (path.absolute(), path.resolve())}
        if names is None:
            for mirror in mirrors:
                shutil.rmtree(mirror, ignore_errors=True)
            return
        for name in names:
            source = Path(name)
            if not name or source.suffix != ".py":
                continue
            for mirror in mirrors:
                for stale in (mirror / source.parent).glob(f"{glob.escape(source.stem)}.*.pyc"):
                    stale.unlink(missing_ok=True)

    def save_scratch(self, path: Path, scratch: Path, dirty: list[str] | None = None) -> bool:
        """Write a worktree's uncommitted and untracked changes as a patch; False when clean.
        dirty: its `dirty` entries, when the caller has just read them."""
        if not (self.dirty(path) if dirty is None else dirty):
            return False
        self._git(path, "add", "-A", "--", ".",
                  *[f":(exclude,literal){name}" for name in self.kept(path)])
        scratch.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(self._git(path, "diff", "--cached", "--binary", "HEAD") + "\n",
                           encoding="utf-8")
        return True

    def dirty(self, path: Path) -> list[str]:
        """Uncommitted or untracked entries (ignored files and our shared folders aside). A
        folder that is not a worktree has none: git holds nothing there, and handoff never
        removes it."""
        if not path.is_dir() or not self.is_live(path):
            return []
        out = self._git(path, "status", "--porcelain", "-z", "--untracked-files=all")
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
        return self._git(self.live(role), "rev-parse", "HEAD")

    def fast_forward(self, commit: str) -> str:
        """Move the ticket branch to commit, which builds on it (a tester's), in the
        implementer's worktree so that its checkout follows; why not ('' when done). git
        refuses to overwrite uncommitted changes there, and so does this."""
        path = self.live(IMPLEMENTER)
        load_gitpython()
        from handoff.machinery import gitcmd

        with self.lock():
            status, out, err = gitcmd.run(path, ("merge", "--ff-only", "--quiet", commit),
                                          env=git_env(path.parent), check=False)
        if status == 0:
            return ""
        said = " ".join(line.strip() for line in (err + out).splitlines() if line.strip())
        return clip(said, 600) or f"git merge --ff-only exited {status}"

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

        Only a live worktree of this repo is removed, and through git. Whatever else stands at
        its path is left as it is, whatever its name: see `left`.
        """
        path = self.path(role)
        with self.lock():
            if not self.is_live(path):
                self._forget(path)
                return False
            if not force:
                self.ensure_clean((role,))
            for share in self.shares:
                link = path / share.path
                if link.is_symlink():
                    link.unlink()
            self.repo.git.worktree("remove", "--force", str(path))
        self._drop_bytecode(path)
        return True

    def present(self) -> list[str]:
        """The names of this ticket's live worktrees (the implementer first, the gate's last):
        what handoff made under its folder, whatever roles the ticket had."""
        if not self.root.is_dir():
            return []
        found = sorted(p.name for p in self.root.iterdir()
                       if NAME.fullmatch(p.name) and not p.is_symlink() and self.is_live(p))
        return sorted(found, key=lambda name: (name != IMPLEMENTER, name == GATE))

    def remove_all(self, force: bool = False,
                   scratch: Callable[[str], Path] | None = None) -> list[str]:
        """Remove every worktree of the ticket (checking all before removing any); the branch
        stays.

        A detached checkout only ever holds a commit already on the branch, plus what its peer
        or test runs left there: with scratch (a checkout's name → where to keep it), that is
        saved as a patch instead of blocking the removal.
        """
        names = self.present()
        detached = [name for name in names if name != IMPLEMENTER]
        if scratch is not None:
            for name in detached:
                self.save_scratch(self.path(name), scratch(name))
        if not force:
            self.ensure_clean(tuple(names) if scratch is None else (IMPLEMENTER,))
        removed = [name for name in names if self.remove(name, force=True)]
        for folder in (self.root, self.root.parent):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        with self.lock():
            self.repo.git.worktree("prune", with_exceptions=False)
        return removed

    def left(self) -> list[Path]:
        """What still stands in the ticket's worktrees folder: not handoff's to delete."""
        return sorted(self.root.iterdir()) if self.root.is_dir() else []


def _exact_pattern(name: str) -> str:
    """An ignore pattern (for git clean -e) matching exactly the path name from the top."""
    return "/" + "".join(f"\\{c}" if c in "\\*?[] !#" else c for c in name)

"""Git worktrees for a ticket's roles, under <repo>/.worktrees/<TICKET>/<role>.

Every checkout sits detached at the exact commit it works on: the implementer's at the ticket
branch's tip (handoff alone moves branch handoff/<TICKET>, forward, to each commit it accepts:
no peer writes a ref of the repository), each tester's, each reviewer's, and the gate's own
(`GATE`), where the verification command and the scanners run. Removal never loses work: a
worktree with uncommitted or untracked files is refused unless forced, the ticket branch is
always kept, and only what git knows as this ticket's worktree is removed. A folder in its
place that is not one is never deleted.

A peer may write its worktree and (the implementer and testers, who commit) its worktree's
git admin folder (`<common>/worktrees/<name>`), whose `commondir` file tells git where the
configuration and hooks live. So nothing handoff runs in a checkout is steered by those files:

* handoff's own git there is pinned (`_git`): GIT_DIR is the admin folder handoff recorded
  when it made the worktree, GIT_COMMON_DIR the repository's own, GIT_WORK_TREE the folder;
  the `.git` file, `commondir` and `gitdir` are never followed. Configuration then comes only
  from what the person owns (system, global, the repository's config, which no fence lets a
  peer write; `config.worktree` is read-only in every fence: handoff.loop.fences), and no hook
  or fsmonitor program runs for it (a person's post-checkout hook would otherwise run on a
  peer's files with the person's rights).
* what handoff keeps about a worktree (who made it, its admin folder, its setup) lives beside
  git's records in the common dir (`RECORDS`), never in the admin folder a peer writes.
* a worktree is removed by handoff itself, never through `git worktree remove`, which finds
  the worktree by what its admin folder claims.

Three more guards:

* git's worktree add/list/prune run under one lock per repository (`repo_lock`):
  tickets started together made git read another process's half-written worktree.
* the setup of a checkout (shared folders, post_create) runs once per worktree, fenced in like
  the gate when the sandbox is on (`setup_fence`): post_create runs code of the commit it is
  made at. Between rounds a detached checkout is reset to its commit and everything git does
  not track is removed but the setup's output (see `point`).
* Python run in a detached checkout writes no bytecode (`bytecode_env`), so no .pyc of one
  round (or one planted by the code under review) is read by the next: `point` removes every
  ignored file but the setup's output, and no bytecode folder is shared between checkouts.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from handoff.config import Share
from handoff.errors import Busy, ExternalFailure, NotFound, Tampered, UsageError, WorkAtRisk
from handoff.inputs import clip
from handoff.machinery import proc
from handoff.machinery.proc import git_timeout
from handoff.machinery.repo import Repo, git, load_gitpython
from handoff.record.store import atomic_write_json
from handoff.role import IMPLEMENTER, NAME

WORKTREES_DIR = ".worktrees"
#: the gate's own checkout, beside the roles' (role.RESERVED keeps the name from a role)
GATE = "gate"
LOCK_FILE = "handoff-worktrees.lock"
#: handoff's records of the worktrees it made, in the common dir:
#: <common>/handoff/worktrees/<ticket>/<name>.json, and the branches it made:
#: <common>/handoff/branches/<ticket>.json
RECORDS = Path("handoff")
#: what older releases kept in a worktree's admin folder (read, never trusted for setup)
LEGACY_OWNER_FILE = "handoff-owner.json"
#: what handoff's own git calls on a ticket's checkouts run with: no hook and no fsmonitor
#: program (a person's hooks may run what a checkout's files say: pre-commit, husky; `worktree
#: add` runs post-checkout on the commit it checks out)
QUIET_CONFIG = {"core.hooksPath": "/dev/null", "core.fsmonitor": "false"}
#: bytes read of a `.git` or `gitdir` file a peer may have written
POINTER_LIMIT = 4096


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


def person_checkouts(repo: Repo) -> dict[str, Path]:
    """Branch → the checkout it is checked out in, among the person's own checkouts of the
    repo: the main one and the linked worktrees handoff did not make. Read from git's files
    rather than `git worktree list`, which reports what every admin folder claims, and a peer
    writes its own (its HEAD may say `main`, its gitdir any folder)."""
    found: dict[str, Path] = {}
    common = repo.common_dir
    mine = {str(data.get("admin")) for data in _records(common) if data.get("admin")}
    candidates = [(common / "HEAD", repo.main_checkout())]
    folder = common / "worktrees"
    if _real_dir(folder):
        for admin in sorted(folder.iterdir()):
            if admin.name in mine or not _real_dir(admin):
                continue
            said = _read_pointer(admin / "gitdir") or ""
            top = Path(os.path.normpath(said)).parent if said else None
            if top is None or _same_path(str(top.parent.parent), repo.top / WORKTREES_DIR):
                continue  # an older release's worktree of a ticket: never a person's
            candidates.append((admin / "HEAD", top))
    for head, top in candidates:
        text = _read_pointer(head) or ""
        if text.startswith("ref: refs/heads/"):
            found.setdefault(text[len("ref: refs/heads/"):], top)
    return found


def _records(common: Path) -> list[dict[str, Any]]:
    """Every worktree record handoff keeps in the common dir."""
    found = []
    for path in sorted((common / RECORDS / "worktrees").glob("*/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            found.append(data)
    return found


# ---- reading what a peer may have written ----------------------------------------------------

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


def _digest_of(path: Path) -> str:
    """sha256 of a regular file's bytes, read without following a link; '' for none or an
    empty one (the same to git), 'unreadable' for anything else there (a link, a FIFO)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return ""
    except OSError:
        return "unreadable"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "unreadable"
        digest = hashlib.sha256()
        while chunk := os.read(fd, 65536):
            digest.update(chunk)
        return "" if digest.hexdigest() == hashlib.sha256().hexdigest() else digest.hexdigest()
    except OSError:
        return "unreadable"
    finally:
        os.close(fd)


def _read_pointer(path: Path) -> str | None:
    """The text of a small regular file (a worktree's `.git`, an admin folder's `gitdir`),
    read without following a link, without blocking on a FIFO, at most POINTER_LIMIT bytes;
    None when it is not such a file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, POINTER_LIMIT + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > POINTER_LIMIT:
        return None
    try:
        return data.decode("utf-8").strip()
    except UnicodeDecodeError:
        return None


def _real_dir(path: Path) -> bool:
    """path is a folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _same_path(said: str, path: Path) -> bool:
    """A path a git pointer file names is path: as written, or once resolved (git writes the
    real path of a repository reached through a link)."""
    if not said:
        return False
    written = Path(os.path.normpath(said))
    return written == path or written == Path(os.path.realpath(path)) or \
        Path(os.path.realpath(written)) == Path(os.path.realpath(path))


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


#: a worktree's setup command line, fenced: (the worktree's folder, argv) → what runs instead,
#: for as long as the context lasts (its limits end with it)
SetupFence = Callable[[Path, Sequence[str]], contextlib.AbstractContextManager[list[str]]]


@dataclass(frozen=True)
class TicketWorktrees:
    repo: Repo
    ticket: str
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
    def root(self) -> Path:
        return self.repo.top / WORKTREES_DIR / self.ticket

    def path(self, role: str) -> Path:
        return self.root / role

    def lock(self) -> contextlib.AbstractContextManager[None]:
        return repo_lock(self.repo.common_dir)

    # ---- handoff's records, beside git's ---------------------------------------------------
    def record_file(self, name: str) -> Path:
        return self.repo.common_dir / RECORDS / "worktrees" / self.ticket / f"{name}.json"

    def record(self, name: str) -> dict[str, Any]:
        """What handoff wrote of the worktree name when it made it ({}: nothing, e.g. one an
        older release made)."""
        try:
            data = json.loads(self.record_file(name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write_record(self, name: str, data: dict[str, Any]) -> None:
        atomic_write_json(self.record_file(name), data)

    def _update_record(self, name: str, **fields: Any) -> None:
        self._write_record(name, {**self.record(name), **fields})

    def _drop_record(self, name: str) -> None:
        self.record_file(name).unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            self.record_file(name).parent.rmdir()  # the ticket's last one

    # ---- is it a worktree? ----------------------------------------------------------------
    def admin_dir(self, path: Path) -> Path | None:
        """The worktree's own git dir (<common>/worktrees/<name>): the one handoff recorded when
        it made it, and what its `.git` file names (read without following a link). None when
        path's `.git` names none of this repository's, or not the recorded one."""
        said = _read_pointer(path / ".git")
        if said is None or not said.startswith("gitdir:"):
            return None
        named = Path(os.path.normpath(said[len("gitdir:"):].strip()))
        folder = self.repo.common_dir / "worktrees"
        if not named.is_absolute() or named.name in ("", ".", "..") or not \
                _same_path(str(named.parent), folder):
            return None
        admin = folder / named.name
        recorded = self.record(path.name).get("admin") if path.parent == self.root else None
        if recorded is not None and recorded != named.name:
            return None
        return admin if _real_dir(admin) else None

    def is_live(self, path: Path) -> bool:
        """path is a worktree of this repo: a folder (not a link) whose .git file points to the
        repo's worktrees/<name>, whose gitdir file points back at it. Read without a git
        process and without following a link (this runs before every command in a worktree)."""
        if not _real_dir(path):
            return False
        admin = self.admin_dir(path)
        if admin is None:
            return False
        return _same_path(_read_pointer(admin / "gitdir") or "", path / ".git")

    def live(self, role: str) -> Path:
        """The role's worktree, or a clear error when its folder is not one (any more)."""
        path = self.path(role)
        if not self.is_live(path):
            raise NotFound(f"the {role}'s folder {path} is not a worktree of {self.repo.top} "
                           "(was it deleted or replaced by hand?)",
                           "'handoff resume' makes it again from the ticket's branch")
        return path

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
        found = _digest_of(admin / "config.worktree")
        if found != made:
            raise Tampered(
                f"{admin / 'config.worktree'} is not what git made with the worktree {path}: "
                "a peer may have written settings there, so handoff runs no git in it",
                f"look at the file; remove it (or mend it) and run the command again; "
                f"'handoff close {self.ticket} --keep-worktrees' leaves it alone")
        return {"GIT_DIR": str(admin), "GIT_COMMON_DIR": str(self.repo.common_dir),
                "GIT_WORK_TREE": str(path), **quiet_env()}

    def _git(self, path: Path, *args: str, check: bool = True) -> str:
        """git in a checkout handoff made, pinned to its own git dirs (`pinned_env`)."""
        return self._run(path, *args, check=check)[1].rstrip("\n")

    def _run(self, path: Path, *args: str, check: bool = True) -> tuple[int, str, str]:
        load_gitpython()
        from handoff.machinery import gitcmd

        return gitcmd.run(path, args, env=self.pinned_env(path), check=check)

    # ---- the ticket branch: handoff's alone ----------------------------------------------
    def branch(self) -> str:
        return branch_name(self.ticket)

    def branch_tip(self) -> str:
        """The ticket branch's commit ('' when there is none). A branch that is a symbolic ref
        (a peer made it point at another, e.g. main) is refused: handoff never follows one."""
        ref = f"refs/heads/{self.branch()}"
        out = git(self.repo.top, "for-each-ref", "--format=%(objectname) %(symref)", ref)
        for line in out.splitlines():
            sha, _, target = line.partition(" ")
            if target:
                raise UsageError(f"branch {self.branch()} is a symbolic ref to {target}: handoff "
                                 "never moves a branch through one",
                                 f"look at it ('git symbolic-ref {ref}'), then delete it "
                                 f"('git symbolic-ref --delete {ref}') and 'handoff resume "
                                 f"{self.ticket}'")
            return sha
        return ""

    def branch_record(self) -> Path:
        return self.repo.common_dir / RECORDS / "branches" / f"{self.ticket}.json"

    def made_branch(self) -> bool:
        """handoff made the ticket branch (its record says so, for this HANDOFF_HOME)."""
        try:
            data = json.loads(self.branch_record().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        home = str(self.home.resolve()) if self.home is not None else ""
        return isinstance(data, dict) and data.get("ticket") == self.ticket and \
            data.get("home", "") == home

    def foreign_branch(self) -> str:
        """The commit of a ticket branch handoff did not make ('' when there is none, or it is
        handoff's own): a new ticket never takes one over."""
        tip = self.branch_tip()
        return tip if tip and not self.made_branch() else ""

    def refuse_foreign_branch(self) -> None:
        tip = self.foreign_branch()
        if tip:
            raise UsageError(
                f"branch {self.branch()} already exists (at {tip[:10]}) and handoff did not "
                f"make it for this ticket: a new ticket never takes over a branch",
                f"look at it ('git log {self.branch()}'); rename it ('git branch -m "
                f"{self.branch()} {self.branch()}-old') or delete it, or pick another ticket id")

    def start_branch(self, base: str) -> str:
        """The ticket branch at base, made now (and recorded as handoff's), or found: its tip."""
        with self.lock():
            self.refuse_foreign_branch()
            tip = self.branch_tip()
            if tip:
                return tip
            atomic_write_json(self.branch_record(), {
                "ticket": self.ticket, "home": str(self.home.resolve()) if self.home else "",
                "base": base})
            git(self.repo.top, "update-ref", "--no-deref", "-m", "handoff: ticket started",
                f"refs/heads/{self.branch()}", base, "0" * len(base))
            return base

    def advance_branch(self, old: str, new: str) -> str:
        """Move the ticket branch from old forward to new (new builds on old), as a plain ref,
        and the implementer's checkout with it (first: when git refuses to overwrite its
        uncommitted work, nothing moves); why not ('' when done). A branch that moved
        meanwhile is not moved again."""
        with self.lock():
            try:
                tip = self.branch_tip()
            except UsageError as exc:  # a symbolic ref: said, never followed
                return f"{exc.message} ({exc.hint})"
            if tip not in (old, new):
                return (f"the branch {self.branch()} is at {tip[:10] or 'nothing'}, not "
                        f"{old[:10]}: it moved outside handoff")
            if tip != new and not self.repo.is_ancestor(old, new):
                return f"{new[:10]} does not build on {old[:10]}"
            path = self.path(IMPLEMENTER)
            if self.is_live(path) and self._git(path, "rev-parse", "HEAD") != new:
                status, out, err = self._run(path, "checkout", "--quiet", "--detach", new,
                                             check=False)
                if status != 0:
                    said = " ".join(line.strip() for line in (err + out).splitlines()
                                    if line.strip())
                    return clip(said, 600) or f"git checkout exited {status}"
            if tip != new:
                from handoff.machinery import gitcmd

                status, out, err = gitcmd.run(
                    self.repo.top, ("update-ref", "--no-deref", "-m", "handoff: accepted",
                                    f"refs/heads/{self.branch()}", new, old), check=False)
                if status != 0:  # e.g. a `.lock` beside the ref, left by a crash or a peer
                    said = " ".join(line.strip() for line in (err + out).splitlines()
                                    if line.strip())
                    return f"git did not move {self.branch()}: " + \
                        (clip(said, 600) or f"update-ref exited {status}")
        return ""

    def merge_in(self, role: str, at: str, commit: str, message: str) -> list[str]:
        """Check the role's checkout out at `at` (detached) and merge commit into it there, as
        a merge commit: [] when git made it, else the files that conflict, left in the
        checkout with the merge under way for the peer to resolve and commit. Run pinned, as
        all of handoff's git in a checkout; the checkout must be clean (ensure_clean)."""
        path = self.live(role)
        if self._git(path, "rev-parse", "HEAD") != at:
            self._git(path, "checkout", "--quiet", "--detach", at)
        status, out, err = self._run(path, "merge", "--no-ff", "--no-edit", "-m", message,
                                     commit, check=False)
        if status == 0:
            return []
        conflicts = self._git(path, "diff", "--name-only", "--diff-filter=U").splitlines()
        if conflicts:
            return conflicts
        self._run(path, "merge", "--abort", check=False)
        said = " ".join(line.strip() for line in (err + out).splitlines() if line.strip())
        raise ExternalFailure(f"git could not merge {commit[:10]} into {path}: "
                              f"{clip(said, 600) or f'exit {status}'}",
                              "nothing was changed; mend what git names, then run it again")

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
                self._add(role, path, self.start_branch(rev) if role == IMPLEMENTER else rev)
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
        if path.name == IMPLEMENTER:
            self.keep_commits()  # its checkout is gone: its commits are not
        self._forget(path)
        self._drop_record(path.name)
        return displaced

    def _forget(self, path: Path) -> None:
        """Drop git's record of a worktree at path whose folder is gone or is not one; nothing
        on disk is touched (prune only drops records whose .git file is missing)."""
        if path.resolve() in registered(self.repo):
            self.repo.git.worktree("prune", env=quiet_env())

    def _add(self, role: str, path: Path, rev: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repo.exclude(f"/{WORKTREES_DIR}/")
        # no hook: post-checkout would run on the commit checked out (a peer's, for the
        # gate and the reviewers) with the person's rights
        self.repo.git.worktree("add", "--detach", str(path), rev, env=quiet_env())
        # the admin folder git chose, read now, before any peer could have written its files
        said = _read_pointer(path / ".git") or ""
        admin = Path(said[len("gitdir:"):].strip()) if said.startswith("gitdir:") else None
        self._write_record(path.name, {
            "home": str(self.home.resolve()) if self.home is not None else "",
            "ticket": self.ticket, "name": path.name,
            "admin": admin.name if admin is not None else "",
            "config_worktree": _digest_of(admin / "config.worktree") if admin else ""})

    def owner(self, path: Path) -> dict[str, str]:
        """Which handoff made this worktree: its HANDOFF_HOME and ticket ({} for a worktree an
        older release made and did not say so)."""
        data = self.record(path.name) if path.parent == self.root else {}
        if not data:
            admin = self.admin_dir(path)
            legacy = _read_pointer(admin / LEGACY_OWNER_FILE) if admin is not None else None
            try:
                data = json.loads(legacy) if legacy else {}
            except ValueError:
                data = {}
        return {k: v for k, v in data.items() if k in ("home", "ticket") and isinstance(v, str)} \
            if isinstance(data, dict) else {}

    # ---- setup ----------------------------------------------------------------------------
    def setup_done(self, path: Path) -> bool:
        return self.is_live(path) and bool(self.record(path.name).get("setup_done"))

    def _setup(self, path: Path) -> None:
        """Shared folders and post_create; marked done in handoff's record only once all of it
        succeeded, so a failure is set up again next time."""
        if not self.is_live(path):
            raise NotFound(f"{path} is not a worktree of {self.repo.top}")
        self._update_record(path.name, setup_done=False)
        self._share(path)
        made: list[str] = []
        if self.post_create:  # nothing else makes files here: no status to ask without one
            before = set(self._untracked(path))
            self._post_create(path, self.setup_env(path.name) if self.setup_env else {})
            made = [name for name in self._untracked(path) if name not in before]
        self._update_record(path.name, setup_output=made, setup_done=True,
                            setup=[list(argv) for argv in self.post_create])

    def _untracked(self, path: Path) -> list[str]:
        """Entries git does not track, ignored ones too (a setup's .venv, node_modules), a
        wholly untracked folder as one, shared folders aside."""
        out = self._git(path, "status", "--porcelain", "-z", "--untracked-files=normal",
                        "--ignored=traditional")
        shared = {s.path.strip("/") for s in self.shares}
        names = [item[3:].rstrip("/") for item in out.split("\0") if item[:3] in ("?? ", "!! ")]
        return [n for n in names if not any(n == s or n.startswith(s + "/") for s in shared)]

    def kept(self, path: Path) -> list[str]:
        """What handoff put beside the checkout and keeps there: the shared folders and the
        output of the worktree's setup."""
        names = [s.path.strip("/") for s in self.shares]
        output = self.record(path.name).get("setup_output") if path.parent == self.root else []
        if isinstance(output, list):
            names += [name for name in output if isinstance(name, str) and name]
        return names

    def bytecode_env(self, role: str) -> dict[str, str]:
        """Python run in a detached checkout (a tester, a reviewer, the gate) writes no
        bytecode: the code under review must not leave a .pyc that a later round, or another
        checkout, reads (a shared bytecode folder once let one ticket's peer make the next
        ticket's gate pass). The standard library's own bytecode, installed beside it, is still
        read. The implementer's checkout is its own, never reset by handoff: Python keeps its
        usual __pycache__ there."""
        return {"PYTHONDONTWRITEBYTECODE": "1"} if role != IMPLEMENTER else {}

    def _share(self, path: Path) -> None:
        for share in self.shares:
            source, target = self.repo.top / share.path, path / share.path
            if not source.exists() or target.exists() or target.is_symlink():
                continue
            if _through_link(path, target):
                continue  # a folder on the way is a link the commit holds: never written through
            target.parent.mkdir(parents=True, exist_ok=True)
            if share.mode == "symlink":
                target.symlink_to(source, target_is_directory=source.is_dir())
            elif source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            else:
                shutil.copy2(source, target)

    def _post_create(self, path: Path, more: Mapping[str, str]) -> None:
        for argv in self.post_create:
            fenced = self.setup_fence(path, argv) if self.setup_fence is not None \
                else contextlib.nullcontext(list(argv))
            try:
                with fenced as command:
                    result = proc.run(command, cwd=path, timeout=self.setup_timeout,
                                      check=False, env={**os.environ, **more} if more else None)
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
        scratch, tracked files are set to commit, and every file git does not track is
        removed, ignored ones too, but the setup's output (its .venv or node_modules:
        post_create runs once per worktree, not every round) and the shared folders. So no
        round sees what another round's run of the code under review left: no planted
        conftest.py, no .pyc (nothing writes bytecode here: `bytecode_env`), no cache. A
        folder that is no longer a worktree is made again at commit, and set up again.
        """
        made = self.ensure(name, commit, recreate=True)
        if made.created:
            return made
        path = made.path
        touched = self.dirty(path)
        if self.save_scratch(path, scratch, touched):
            self._git(path, "reset", "--hard", "--quiet")
        # --force: tracked files become the commit's even where a kept file stood in the way
        self._git(path, "checkout", "--quiet", "--force", "--detach", commit)
        keep = [arg for kept in self.kept(path) for arg in ("-e", _exact_pattern(kept))]
        self._git(path, "clean", "-ffdqx", *keep)
        return made

    def save_scratch(self, path: Path, scratch: Path, dirty: list[str] | None = None) -> bool:
        """Write a worktree's uncommitted and untracked changes as a patch; False when clean.
        dirty: its `dirty` entries, when the caller has just read them."""
        if not (self.dirty(path) if dirty is None else dirty):
            return False
        kept = self.kept(path)
        # an ignored path named even in an exclude makes `git add` fail: name only the others
        ignored = set(self._git(path, "check-ignore", "--no-index", *kept, check=False)
                      .splitlines()) if kept else set()
        self._git(path, "add", "-A", "--", ".",
                  *[f":(exclude,literal){name}" for name in kept if name not in ignored])
        scratch.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(self._git(path, "diff", "--cached", "--binary", "HEAD") + "\n",
                           encoding="utf-8")
        return True

    def dirty(self, path: Path) -> list[str]:
        """Uncommitted or untracked entries (ignored files and our shared folders aside). A
        folder that is not a worktree has none: git holds nothing there, and handoff never
        removes it."""
        if not self.is_live(path):
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

    def keep_commits(self) -> str:
        """Before the implementer's checkout goes (removed, or found deleted by hand and made
        again): commits it made that handoff has not put on the ticket branch yet go onto it,
        forward only, so no commit is lost with the checkout. Its HEAD is read from the admin
        folder handoff recorded, as data (a full commit id), even when the folder is gone. The
        commit the branch moved to ('' when nothing moved)."""
        admin = self.record(IMPLEMENTER).get("admin")
        if not isinstance(admin, str) or not admin or "/" in admin or admin in (".", ".."):
            return ""
        head = _read_pointer(self.repo.common_dir / "worktrees" / admin / "HEAD") or ""
        tip = self.branch_tip()
        if not tip or len(head) != len(tip) or head == tip or \
                not all(c in "0123456789abcdef" for c in head) or \
                not self.repo.commit_exists(head) or not self.repo.is_ancestor(tip, head):
            return ""
        git(self.repo.top, "update-ref", "--no-deref", "-m",
            "handoff: the implementer's commits, kept at close", f"refs/heads/{self.branch()}",
            head, tip)
        return head

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
            if admin is not None and _real_dir(admin):
                shutil.rmtree(admin)
            self._drop_record(role)
        return True

    def present(self) -> list[str]:
        """The names of this ticket's live worktrees (the implementer first, the gate's last):
        what handoff made under its folder, whatever roles the ticket had."""
        if not _real_dir(self.root):
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
            if _real_dir(folder) and not any(folder.iterdir()):
                folder.rmdir()
        with self.lock():
            self.repo.git.worktree("prune", with_exceptions=False, env=quiet_env())
        return removed

    def left(self) -> list[Path]:
        """What still stands in the ticket's worktrees folder: not handoff's to delete."""
        return sorted(self.root.iterdir()) if _real_dir(self.root) else []


def _through_link(top: Path, target: Path) -> bool:
    """A folder between top and target is a link (or not a folder): writing target would land
    where the link points, outside the checkout."""
    folder = target.parent
    while folder != top and top in folder.parents:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            return True
        folder = folder.parent
    return False


def _exact_pattern(name: str) -> str:
    """An ignore pattern (for git clean -e) matching exactly the path name from the top."""
    return "/" + "".join(f"\\{c}" if c in "\\*?[] !#" else c for c in name)

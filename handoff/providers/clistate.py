"""Each peer's own CLI state folder, seeded afresh from the person's at every launch.

A coding CLI keeps its settings, its login and its session logs in one folder (Claude Code's
~/.claude, Codex's $CODEX_HOME, Gemini's ~/.gemini, opencode's XDG folders), and it obeys what
it finds there: Claude Code runs the hooks of its settings.json and the MCP servers of its
.claude.json, reads CLAUDE.md into every session, sources its shell snapshots before each
command. One such folder shared by every role, every ticket and the person's own CLI lets one
peer's bytes steer another peer, or the person's next unsandboxed run.

So each role of a ticket runs its CLI on a folder of its own, `<ticket dir>/cli/<role>/<cli>/`
(`Provider.own`; the CLI's own variable points there: `Provider.state_env`), and the sandbox
lets it write that folder alone. Before every launch handoff:

1. prunes the folder down to what the provider declares as data (`Provider.keeps`: the
   session logs handoff reads for usage and transcripts). Everything else the CLI, or the
   peer, wrote there is removed: a settings hook, an MCP server, a memory file, a shell
   snapshot planted for the next launch is gone before it starts. Links, FIFOs and the like are
   removed wherever they are, never followed;
2. seeds it from the person's folder (`Provider.seeds`): what the CLI needs to start as the
   person's own does (their login, settings, trust, instructions), copied 600, and what the
   provider derives from the person's files (`Provider.made`: Claude Code's .claude.json cut
   down to onboarding, approved keys, account and the repository's trust);
3. links what is read-only in effect (`Provider.links`: a folder in the person's home, which the
   fence shows read-only; never one the peer could reach to write through).

Nothing is ever written into the person's folders. One exception to "afresh": a login the CLI
itself refreshed in the role's folder (an OAuth access token renewed with its refresh token,
which rotates it) is kept for the role's next launch while the person's own copy is unchanged
since it was seeded; the person's wins as soon as it changes (they logged in again). What was
seeded is recorded beside the folder (`<cli>.seeded.json`), out of the peer's reach.
"""

from __future__ import annotations

import contextlib
import fnmatch
import hashlib
import json
import os
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from handoff.errors import UsageError
from handoff.record import peerfiles
from handoff.record.store import atomic_write_bytes, private_dir, write_failed

if TYPE_CHECKING:
    from handoff.providers.base import Provider

#: a file of the person's, copied (600)
FILE = "file"
#: a folder of the person's, its files and folders copied (600/700; 700 where the person's file
#: is executable: a skill's script)
TREE = "tree"
#: a login: copied, unless the CLI refreshed the role's copy since it was seeded (above)
LOGIN = "login"

#: what one seeded folder may copy from the person's at a launch: the copy is made again at
#: every launch of every role, so a tree bigger than this is a mistake to say, not to pay
TREE_BYTES = 32 * 1024 * 1024
TREE_FILES = 4000
#: a single file (a settings file, a login) larger than this is no configuration
FILE_BYTES = 8 * 1024 * 1024
#: what the record beside the folder is called, after the CLI's folder
RECORD = ".seeded.json"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Seed:
    """One thing of the person's a role's CLI gets at each launch: path, beneath the role's
    folder (`Provider.seed_source` says where the person's copy is), and how it is given."""

    path: str
    how: str = FILE
    #: names left out of a TREE (what `Provider.links` gives instead, or what is no config)
    skip: tuple[str, ...] = ()


@dataclass(frozen=True)
class Seeded:
    """What one seeding did, for the launch's trace and the tests."""

    folder: Path
    #: the seeds copied from the person's folder, and the files the provider made
    copied: tuple[str, ...]
    #: logins the CLI had refreshed, kept as the role's
    kept: tuple[str, ...]
    #: entries of the role's folder removed (not data)
    removed: tuple[str, ...]
    #: links made to the person's read-only folders
    linked: tuple[str, ...]
    seconds: float


def seed(provider: Provider, person: Mapping[str, str], worktree: Path) -> Seeded | None:
    """Make the provider's own folder ready for a launch in worktree: pruned to its data,
    seeded from the person's folders as person (the orchestrator's environment) locates them.
    None when the provider keeps no state of its own (not bound to a role's folder, or a CLI
    handoff knows nothing of). Raises UsageError when a person's folder to copy is too big or
    unreadable, ExternalFailure when the role's folder cannot be written."""
    own = provider.own
    if own is None or not provider.state_env():
        return None
    began = time.monotonic()
    _no_link(own)
    private_dir(own)
    record_path = own.with_name(own.name + RECORD)
    record = _read_record(record_path)
    keeps = tuple(PurePosixPath(p).parts for p in provider.keeps)
    logins = {s.path for s in provider.seeds if s.how == LOGIN}
    removed: list[str] = []
    held = _prune(own, (), keeps, logins, removed)
    copied: list[str] = []
    kept: list[str] = []
    seeded: dict[str, str] = {}
    for item in provider.seeds:
        source = provider.seed_source(person, item.path)
        dest = own / item.path
        if item.how == LOGIN:
            verdict = _login(source, dest, item.path in held, record.get(item.path, ""))
            if verdict is None:
                continue
            seeded[item.path], was_kept = verdict
            (kept if was_kept else copied).append(item.path)
        elif item.how == TREE:
            if _tree(source, dest, item.skip):
                copied.append(item.path)
        elif _file(source, dest):
            copied.append(item.path)
    for name, text in provider.made(person, worktree).items():
        _write(own / name, text.encode("utf-8"), 0o600)
        copied.append(name)
    linked = []
    for name, target in provider.links(person).items():
        if _link(own, name, target):
            linked.append(name)
    _write(record_path, (json.dumps(seeded, indent=2, sort_keys=True) + "\n").encode(), 0o600)
    return Seeded(own, tuple(copied), tuple(kept), tuple(removed), tuple(linked),
                  time.monotonic() - began)


def forget_logins(provider: Provider) -> list[Path]:
    """Remove the copies of the person's logins from the provider's own folder (a closed
    ticket keeps its record, not a second copy of a person's credentials); the files removed."""
    own = provider.own
    if own is None or own.is_symlink() or not own.is_dir():
        return []
    gone = []
    for item in provider.seeds:
        if item.how == LOGIN:
            path = own / item.path
            with contextlib.suppress(peerfiles.Refused):
                if peerfiles.remove_tree(own, path):
                    gone.append(path)
    return gone


def _no_link(own: Path) -> None:
    """own and the role's folder above it as handoff made them: a link put in their place (a
    peer outside the sandbox may write anything) is removed, never followed, so that pruning
    never reaches into a folder it points at (the person's own)."""
    for folder in (own.parent, own):
        if folder.is_symlink():
            try:
                folder.unlink()
            except OSError as exc:
                raise write_failed(folder, exc) from None


# ---- pruning: the role's folder down to its data --------------------------------------------

def _prune(own: Path, below: tuple[str, ...], keeps: tuple[tuple[str, ...], ...],
           logins: set[str], removed: list[str]) -> set[str]:
    """Remove everything beneath own/below that is neither data (a regular file matching one
    of keeps, in folders matching their folder parts) nor a login the CLI may have refreshed;
    the logins found in place. Nothing is followed: a link is removed as a link."""
    held: set[str] = set()
    for name, mode in _entries(own, below):
        parts = (*below, name)
        relative = "/".join(parts)
        if stat.S_ISREG(mode) and (relative in logins or _matches(parts, keeps, whole=True)):
            if relative in logins:
                held.add(relative)
            continue
        if stat.S_ISDIR(mode) and (_matches(parts, keeps, whole=False)
                                   or any(login.startswith(relative + "/") for login in logins)):
            held |= _prune(own, parts, keeps, logins, removed)
            continue
        try:
            peerfiles.remove_tree(own, own.joinpath(*parts))
        except peerfiles.Refused as exc:
            raise UsageError(f"cannot clear the CLI state folder of a peer: {exc.message}",
                             exc.hint) from None
        removed.append(relative)
    return held


def _entries(own: Path, below: tuple[str, ...]) -> list[tuple[str, int]]:
    """The names in own/below and their lstat modes, the folder reached from own without
    following a link (one planted on the way lists nothing: its parent removes it)."""
    try:
        fd = os.open(own, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return []
    try:
        for part in below:
            inner = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = inner
        found = []
        with os.scandir(fd) as entries:  # on a duplicate: fd stays ours
            for count, entry in enumerate(entries):
                if count >= peerfiles.MAX_ENTRIES:
                    break
                with contextlib.suppress(OSError):  # gone meanwhile
                    found.append((entry.name, entry.stat(follow_symlinks=False).st_mode))
        return found
    except OSError:
        return []
    finally:
        os.close(fd)


def _matches(parts: tuple[str, ...], keeps: tuple[tuple[str, ...], ...], whole: bool) -> bool:
    """parts matches a pattern of keeps component by component: the whole of it (a data file),
    or its start (a folder on the way to one)."""
    for pattern in keeps:
        fits = len(pattern) == len(parts) if whole else len(pattern) > len(parts)
        if fits and all(fnmatch.fnmatchcase(p, q) for p, q in zip(parts, pattern, strict=False)):
            return True
    return False


# ---- seeding from the person's folders ------------------------------------------------------

def _person_bytes(source: Path, limit: int = FILE_BYTES) -> bytes | None:
    """A file of the person's (a link the person made is theirs to make: followed), or None
    when there is none; refused when it is too big or no regular file."""
    try:
        info = source.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}",
                         "handoff copies it into each peer's own CLI folder: make it readable "
                         "to you") from None
    if stat.S_ISDIR(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        raise UsageError(f"{source} is no regular file", "handoff copies this file of your CLI "
                         "into each peer's own folder: put a plain file there")
    if info.st_size > limit:
        raise UsageError(f"{source} holds {info.st_size} bytes, more than the {limit} handoff "
                         "copies of a CLI's configuration file into each peer's folder",
                         "make it smaller")
    try:
        return source.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}",
                         "make it readable to you") from None


def _file(source: Path, dest: Path) -> bool:
    data = _person_bytes(source)
    if data is None:
        return False
    _write(dest, data, 0o600)
    return True


def _login(source: Path, dest: Path, in_place: bool, seeded: str) -> tuple[str, bool] | None:
    """(the digest recorded as seeded, whether the role's own copy was kept), or None when the
    person has no such login (the role's copy, if any, is removed: not the person's)."""
    data = _person_bytes(source)
    theirs = _digest(data) if data is not None else ""
    if in_place and seeded:
        ours = _role_digest(dest)
        # the CLI rewrote it (a refresh) and the person's is still what was seeded: theirs may
        # no longer work (a refresh token rotates), the role's does
        if ours and ours != seeded and theirs == seeded:
            return seeded, True
    if data is None:
        with contextlib.suppress(peerfiles.Refused):
            peerfiles.remove_tree(dest.parent, dest)
        return None
    _write(dest, data, 0o600)
    return theirs, False


def _role_digest(path: Path) -> str:
    try:
        return _digest(peerfiles.read_bytes(path.parent, path, FILE_BYTES))
    except peerfiles.Refused:
        return ""


def _tree(source: Path, dest: Path, skip: tuple[str, ...]) -> bool:
    """Copy the person's folder source (a link to it followed: dotfiles are often linked) into
    dest, which pruning left empty: regular files and folders, links inside it to files
    followed, links to folders left out (they may loop); bounded in files and bytes."""
    try:
        top = source.resolve(strict=True)
    except (OSError, RuntimeError):
        return False
    if not top.is_dir():
        return False
    files = size = 0
    for folder, dirs, names in os.walk(top):
        here = Path(folder)
        relative = here.relative_to(top)
        dirs[:] = [d for d in dirs if not (here / d).is_symlink()
                   and not (relative == Path() and d in skip)]
        for name in names:
            if relative == Path() and name in skip:
                continue
            path = here / name
            try:
                info = path.stat()
            except OSError:
                continue  # a dangling link
            if not stat.S_ISREG(info.st_mode):
                continue
            files += 1
            size += info.st_size
            if files > TREE_FILES or size > TREE_BYTES:
                raise UsageError(
                    f"{source} holds more than {TREE_FILES} files or {TREE_BYTES} bytes",
                    "handoff copies it into each peer's own CLI folder at every launch: keep "
                    "large things elsewhere and refer to them by path")
            data = _person_bytes(path)
            if data is not None:
                mode = 0o700 if info.st_mode & stat.S_IXUSR else 0o600
                _write(dest / relative / name, data, mode)
    return True


def _link(own: Path, name: str, target: Path) -> bool:
    """own/name a symbolic link to target (pruning removed whatever was there)."""
    if not os.path.lexists(target):
        return False
    path = own / name
    private_dir(path.parent)
    try:
        os.symlink(target, path)
    except FileExistsError:
        return False  # a seed of the same name came first
    except OSError as exc:
        raise write_failed(path, exc) from None
    return True


def _write(path: Path, data: bytes, mode: int) -> None:
    """path written aside and renamed over (a link there is replaced, not followed), with mode.
    No fsync: the folder is made again at the next launch, and a copy torn by a power cut is
    replaced then."""
    private_dir(path.parent)
    atomic_write_bytes(path, data, mode, durable=False)


def _read_record(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["FILE", "LOGIN", "TREE", "Seed", "Seeded", "forget_logins", "seed"]

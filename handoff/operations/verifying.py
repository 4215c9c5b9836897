"""`handoff verify BUNDLE`: a passed ticket's evidence bundle (handoff.loop.evidence) checked
by anyone who has it and the signer's public key: the signature over its manifest, every
member's hash against the manifest, the change against the repository, and (`--rerun`) the
gate run again in a fresh, fenced checkout of the commit.

A bundle is a file from elsewhere: it is read in memory, member by member, bounded, and
nothing of it is ever extracted or run. Whatever does not hold is refused, naming what.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import tarfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from handoff import config as config_mod
from handoff.errors import HandoffError, Tampered, UsageError
from handoff.loop.evidence import CHANGE, FORMAT, MANIFEST, SIGNATURE, SIGNER
from handoff.loop.gate import run_gate
from handoff.loop.workspace import Workspace
from handoff.machinery.repo import Repo, short_sha
from handoff.machinery.worktrees import GATE
from handoff.record import signing
from handoff.record.store import private_dir
from handoff.record.ticket import TicketDir

#: what a bundle may hold: members, and bytes each and in all
MEMBERS, MEMBER_BYTES, BUNDLE_BYTES = 64, 32 << 20, 128 << 20
#: where a --rerun's own throwaway record is kept while it runs
RERUNS = "reruns"


@dataclass(frozen=True)
class Verified:
    bundle: Path
    ticket: str
    commit: str
    signer: str
    checked: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        return [f"{self.bundle.name}: verified: {self.ticket} passed at {short_sha(self.commit)}, "
                f"signed by {self.signer}", *(f"  {line}" for line in self.checked)]


def read_bundle(path: Path) -> dict[str, bytes]:
    """The bundle's members by name: a regular file of plain, flat, bounded members (a link,
    a folder, a name with a path in it, a member twice: not a bundle handoff made)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise UsageError(f"cannot read the bundle {path}: {exc.strerror}",
                         "name the evidence-<commit>.tar file of a passed ticket") from None
    with os.fdopen(fd, "rb") as raw:
        info = os.fstat(raw.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > BUNDLE_BYTES:
            raise UsageError(f"{path} is not an evidence bundle (not a regular file of at most "
                             f"{BUNDLE_BYTES >> 20} MiB)")
        try:
            with tarfile.open(fileobj=raw, mode="r:") as tar:
                return _members(tar, path)
        except tarfile.TarError as exc:
            raise UsageError(f"{path} is not an evidence bundle: {exc}") from None


def _members(tar: tarfile.TarFile, path: Path) -> dict[str, bytes]:
    found: dict[str, bytes] = {}
    for member in tar:
        name = member.name
        if not member.isfile() or "/" in name or name.startswith(".") or not name:
            raise Tampered(f"{path} holds {name!r:.60}, which no bundle handoff makes holds "
                           "(a link, a folder or a path)", "get the bundle again from its signer")
        if name in found or len(found) >= MEMBERS or member.size > MEMBER_BYTES:
            raise Tampered(f"{path} holds {name!r:.60} twice, or too many or too large members",
                           "get the bundle again from its signer")
        data = tar.extractfile(member)
        found[name] = data.read() if data is not None else b""
    return found


def verify(home: Path, path: Path, repo_at: Path | None, key: Path | None,
           rerun: bool) -> Verified:
    members = read_bundle(path)
    missing = [name for name in (MANIFEST, SIGNATURE, SIGNER) if name not in members]
    if missing:
        raise Tampered(f"{path.name} has no {', '.join(missing)}: it is not a signed bundle")
    trusted = signing.read_public(key) if key is not None else signing.own_public(home)
    whose = str(key) if key is not None else "this handoff home's key"
    claimed = signing.public_key(members[SIGNER].decode("ascii", "replace"),
                                 f"{path.name}'s signer.pub")
    if claimed.raw != trusted.raw:
        raise Tampered(f"{path.name} is signed by another key ({claimed.fingerprint}), not "
                       f"{whose} ({trusted.fingerprint})",
                       "verify it with its signer's public key: handoff verify BUNDLE --key FILE "
                       "(their keys/evidence.pub), once you trust that it is theirs")
    if not trusted.verifies(members[SIGNATURE], members[MANIFEST]):
        raise Tampered(f"{path.name}: the manifest does not match its signature: it was changed "
                       "after it was signed", "get the bundle again from its signer")
    manifest = json.loads(members[MANIFEST])
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise UsageError(f"{path.name} is a bundle of another format "
                         f"({manifest.get('format') if isinstance(manifest, dict) else '?'!r})",
                         f"this handoff reads {FORMAT}")
    files = manifest.get("files") or {}
    for name in sorted(set(members) - {MANIFEST, SIGNATURE, SIGNER} - set(files)):
        raise Tampered(f"{path.name} holds {name}, which its signed manifest does not list")
    for name, digest in sorted(files.items()):
        if name not in members:
            raise Tampered(f"{path.name} lacks {name}, which its signed manifest lists")
        found = hashlib.sha256(members[name]).hexdigest()
        if found != digest:
            raise Tampered(f"{name} in {path.name} was changed after it was signed: its sha256 is "
                           f"{found[:16]}…, the signed manifest says {str(digest)[:16]}…")
    ticket, commit = str(manifest.get("ticket")), str(manifest.get("commit"))
    checked = [f"signature: the manifest is signed by {trusted.fingerprint} ({whose})",
               f"files: {len(files)} match the signed manifest"]
    repo = _repo(repo_at)
    notes: list[str] = []
    if repo is None or not repo.commit_exists(commit):
        where = f"{repo.top}" if repo is not None else "no repository here"
        if rerun:
            raise UsageError(f"{where} does not hold {short_sha(commit)}: the gate cannot be run "
                             "again", "fetch the ticket's branch, or pass --repo")
        notes.append(f"the change was not checked against a repository ({where} does not hold "
                     f"{short_sha(commit)}): fetch it, or pass --repo")
    else:
        base = str(manifest.get("base_commit"))
        change = hashlib.sha256(repo.diff(base, commit).encode()).hexdigest()
        if change != files.get(CHANGE):
            raise Tampered(f"the change {short_sha(base)}...{short_sha(commit)} in {repo.top} is "
                           f"not the bundle's {CHANGE}", "the bundle is of other work than "
                           "the repository holds under that commit")
        checked.append(f"change: {repo.top} holds {short_sha(commit)}, and its change from "
                       f"{short_sha(base)} is the bundle's")
        if rerun:
            checked.append(_rerun(home, repo, manifest, commit))
    return Verified(path, ticket, commit, trusted.fingerprint, tuple(checked), tuple(notes))


def _repo(at: Path | None) -> Repo | None:
    """The repository named (its errors said), else the one here if there is one."""
    try:
        return Repo.at(at or Path.cwd())
    except HandoffError:
        if at is not None:
            raise
        return None  # no repository here: the bundle alone is checked


def _rerun(home: Path, repo: Repo, manifest: dict[str, object], commit: str) -> str:
    """The bundle's gate command run again in a fresh checkout of the commit, fenced and
    bounded as a ticket's gate is; refused when its result is not the bundle's pass."""
    gate = manifest.get("gate")
    command = gate.get("command") if isinstance(gate, dict) else None
    if not isinstance(command, list) or not command or \
            not all(isinstance(part, str) for part in command):
        raise UsageError("the bundle names no gate command to run again")
    token = f"verify-{uuid.uuid4().hex[:10]}"
    tdir = TicketDir(private_dir(private_dir(home / RERUNS) / token))
    ws = Workspace(home=home, tdir=tdir, repo=repo, config=config_mod.load(home, repo.top))
    try:
        cwd = ws.worktrees.create_detached(GATE, commit)
        result = run_gate(command, cwd, ws.gate_env(), ws.config.gate_timeout,
                          tdir.path / "gate.log", fence=ws.gate_fence(),
                          nice=ws.config.peer_nice)
    finally:
        ws.worktrees.remove_all(force=True)
        shutil.rmtree(tdir.path, ignore_errors=True)
    if not result.passed:
        raise Tampered(f"the gate run again at {short_sha(commit)} did not pass: "
                       f"{result.summary()}", "the bundle says it passed: look at the commit "
                       "and the gate command, in a checkout of your own")
    return f"rerun: {result.summary()} in a fresh fenced checkout of {short_sha(commit)}"

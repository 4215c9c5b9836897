"""What each peer, and the gate, may see and touch when the sandbox is on.

The rule is the same for every role: the whole filesystem read-only, credentials hidden, the
handoff home hidden; writable only the role's worktree and what its work needs of the git
directory, its CLI's own state, the drafts and signal folders of its ticket, and the paths
the person opened (`sandbox.write`). The implementer commits, so it may write objects and the
refs of handoff's own branches (never main's, never another ticket's branch, never the
config or the hooks); a tester commits in its detached checkout, so it may write objects but
no ref (handoff moves the branch to its commit); a reviewer writes only its worktree's admin
folder (its index). The gate runs in a checkout of its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import handoff
from handoff.config import Config
from handoff.machinery import sandbox
from handoff.machinery.repo import Repo
from handoff.machinery.sandbox import HIDE, READ, WRITE, Fence
from handoff.machinery.worktrees import (
    GATE,
    WORKTREES_DIR,
    TicketWorktrees,
    branch_name,
    bytecode_root,
)
from handoff.providers import Provider
from handoff.record.seals import Seals
from handoff.record.store import private_dir
from handoff.record.ticket import TicketDir
from handoff.role import Kind


def peer(role: str, kind: Kind, provider: Provider, env: Mapping[str, str], *, home: Path,
         tdir: TicketDir, repo: Repo, worktrees: TicketWorktrees, config: Config) -> Fence:
    """The fence of role's CLI (env: the peer's environment, where its CLI's state is)."""
    worktree = worktrees.path(role)
    fence = _base(worktree, env, home, repo, config, provider)
    fence = fence.with_rules(READ, [tdir.path])
    fence = fence.with_rules(HIDE, [Seals(tdir.path).folder])
    # made now: a folder that is not there has no mount point in the read-only ticket folder
    drafts, signals = private_dir(tdir.drafts(role)), private_dir(tdir.signals(role))
    fence = fence.with_rules(WRITE, [drafts, signals])
    fence = fence.with_rules(WRITE, _git_paths(role, kind, repo, worktrees, tdir.ticket))
    if kind is Kind.IMPLEMENTER:
        fence = fence.with_rules(READ, others(repo, tdir.ticket))
    state = [path for path in provider.state_dirs(env) if _made(path)]
    fence = fence.with_rules(WRITE, state)
    return _holes(fence, config)


def gate(*, home: Path, repo: Repo, worktrees: TicketWorktrees, config: Config,
         env: Mapping[str, str]) -> Fence:
    """The gate's fence: its own checkout, at the commit under test, and nothing of the
    ticket's folder."""
    fence = _base(worktrees.path(GATE), env, home, repo, config, None)
    fence = fence.with_rules(WRITE, _git_paths(GATE, Kind.REVIEWER, repo, worktrees, ""))
    return _holes(fence, config)


def _base(worktree: Path, env: Mapping[str, str], home: Path, repo: Repo, config: Config,
          provider: Provider | None) -> Fence:
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    fence = Fence(worktree)
    # visible even where the private /tmp or a hidden folder covers them: the tools that run
    # (Python, handoff, the CLI), the home's settings, the repository's git directory and the
    # folders shared into the worktrees
    fence = fence.with_rules(READ, [user_home, Path(sys.prefix), Path(sys.base_prefix),
                                    Path(handoff.__file__).resolve().parent.parent,
                                    *_program_dirs(provider), *_path_dirs(env),
                                    repo.common_dir,
                                    *(repo.top / share.path for share in config.share)])
    # TMPDIR private, as /tmp is: an empty folder of the peer's own where the path is
    scratch = [Path(env["TMPDIR"])] if os.path.isabs(env.get("TMPDIR") or "") else []
    # every ticket's worktrees are hidden, the role's own is bound again below: a peer sees
    # neither another ticket's checkout nor its partner's uncommitted work
    fence = fence.with_rules(HIDE, [home, *sandbox.credentials(user_home), _tmux_dir(),
                                    *scratch, repo.top / WORKTREES_DIR])
    fence = fence.with_rules(WRITE, [worktree, bytecode_root()])
    return fence


def _holes(fence: Fence, config: Config) -> Fence:
    """The person's own holes and extra hidden paths, over handoff's rules."""
    return fence.with_rules(WRITE, config.sandbox.paths("write")).with_rules(
        HIDE, config.sandbox.paths("hide"))


def _git_paths(role: str, kind: Kind, repo: Repo, worktrees: TicketWorktrees,
               ticket: str) -> list[Path]:
    """What a role's git commands write: its worktree's admin folder (index, HEAD, logs); for
    a tester also the objects its commits add; for the implementer also handoff's branch
    folder, where a commit's ref is written (git writes `<ref>.lock` and renames it, so the
    folder, not the file, is bound: the other entries in it are bound read-only again by
    `others`)."""
    admin = worktrees.admin_dir(worktrees.path(role))
    paths = [admin] if admin is not None else []
    if kind is Kind.TESTER:
        paths.append(repo.common_dir / "objects")
    if kind is Kind.IMPLEMENTER and ticket:
        common = repo.common_dir
        branch = branch_name(ticket)
        for folder in (common / "refs" / "heads", common / "logs" / "refs" / "heads"):
            own = folder / branch
            own.parent.mkdir(parents=True, exist_ok=True)
            paths += [common / "objects", own.parent]
    return paths


def others(repo: Repo, ticket: str) -> list[Path]:
    """The entries of handoff's branch folders that are not this ticket's: another ticket's
    branch stays read-only to this one's implementer."""
    branch = branch_name(ticket)
    found = []
    for folder in (repo.common_dir / "refs" / "heads", repo.common_dir / "logs" / "refs" / "heads"):
        own = folder / branch
        try:
            found += [entry for entry in own.parent.iterdir()
                      if entry.name not in (own.name, f"{own.name}.lock")]
        except OSError:
            continue
    return found


def _made(folder: Path) -> bool:
    """folder exists (made now if it did not, as its CLI would at its first start)."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError:
        return False
    return folder.is_dir()


def _program_dirs(provider: Provider | None) -> list[Path]:
    """Where the CLI's program lives (an npm install keeps its code beside node_modules)."""
    if provider is None:
        return []
    found = provider.executable()
    if not found:
        return []
    real = Path(os.path.realpath(found))
    dirs = [Path(found).parent, real.parent]  # the name on PATH may be a link elsewhere
    for parent in real.parents:
        if parent.name == "node_modules":
            dirs.append(parent)
            break
    return dirs


def _path_dirs(env: Mapping[str, str]) -> list[Path]:
    """The folders of the peer's PATH: every tool it may run stays visible."""
    return [Path(part) for part in (env.get("PATH") or "").split(os.pathsep)
            if part and os.path.isabs(part)]


def _tmux_dir() -> Path:
    """The folder of handoff's tmux socket: a peer that reaches it reads every pane and types
    into another peer's."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(base) / f"tmux-{os.getuid()}"

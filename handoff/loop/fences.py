"""What each peer, and the gate, may see and touch when the sandbox is on.

The rule is the same for every role: the whole filesystem read-only, credentials hidden, the
handoff home hidden; writable only the role's worktree and what its work needs of the git
directory, its CLI's own state, the drafts and signal folders of its ticket, and the paths
the person opened (`sandbox.write`). The implementer and the testers commit in their detached
checkouts, so they may write objects and their worktree's admin folder (its HEAD, index and
logs), never a ref (handoff moves the ticket branch to the commits it accepts), the config or
the hooks. A reviewer and the gate write nothing of the git directory: their index stays what
handoff made it. In every checkout, what tells git where its configuration lives (the
worktree's `.git` file, the admin folder's `commondir`, `gitdir` and `config.worktree`) is
read-only, and so is the output of the checkout's setup (its .venv, node_modules) for whoever
runs the code under review: a round's run cannot leave a sitecustomize.py for the next.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import handoff
from handoff.config import Config
from handoff.machinery import credentials, sandbox
from handoff.machinery.repo import Repo
from handoff.machinery.repo_worktrees import WORKTREES_DIR
from handoff.machinery.sandbox import HIDE, READ, WRITE, Fence
from handoff.machinery.worktrees import GATE, TicketWorktrees
from handoff.providers import Provider
from handoff.record.grants import Grants
from handoff.record.store import private_dir
from handoff.record.ticket import TicketDir
from handoff.role import Kind


def peer(role: str, kind: Kind, provider: Provider, env: Mapping[str, str], *, home: Path,
         tdir: TicketDir, repo: Repo, worktrees: TicketWorktrees, config: Config) -> Fence:
    """The fence of role's CLI (env: the peer's environment, where its CLI's state is)."""
    worktree = worktrees.path(role)
    fence = _base(worktree, env, home, repo, config, provider)
    fence = fence.with_rules(READ, ticket_view(tdir, role, kind))
    # every role's CLI folder (logins, sessions) hidden; the role's own is bound again below
    fence = fence.with_rules(HIDE, [tdir.path / "cli"])
    # made now: a folder that is not there is not hidden, and would be seen once made
    fence = fence.with_rules(HIDE, [private_dir(Grants(tdir.path).folder)])
    # made now: a folder that is not there has no mount point in the read-only ticket folder
    drafts, signals = private_dir(tdir.drafts(role)), private_dir(tdir.signals(role))
    fence = fence.with_rules(WRITE, [drafts, signals])
    fence = fence.with_rules(WRITE, _git_paths(kind, repo, worktrees, worktree))
    fence = fence.with_rules(READ, pinned(worktrees, worktree, kind))
    if kind is Kind.PLANNER:  # it reads the base to plan: its checkout is not its to change
        fence = fence.with_rules(READ, [worktree])
    state = [path for path in provider.state_dirs(env) if _made(path)]
    fence = fence.with_rules(WRITE, state)
    return _holes(fence, config)


def ticket_view(tdir: TicketDir, role: str, kind: Kind) -> list[Path]:
    """What of the ticket's folder a peer reads. A tester or a reviewer is blind to how the
    code was written: it sees its own briefs and contract, the plan, the diffs, the gate's and
    the scanners' logs and the intake socket (the ledger and the weakened tests are in its
    brief), never the implementer's reports, another reviewer's, the event log, the state or
    a transcript. Each of them is started afresh for every round, so what it needs is there
    when its fence is made. The implementer, whose work it all is, reads the folder (the gate
    logs of later rounds among it); what no peer reads is hidden in every fence (`grants/`)."""
    if kind is Kind.IMPLEMENTER:
        return [tdir.path]
    folder = tdir.path
    if kind is Kind.PLANNER:  # the ticket's text is in its brief; no plan, diff or log yet
        return [folder / "inbox" / role, folder / "ticket.md",
                folder / "contracts" / f"{role}.md", folder / "intake",
                folder / "gemini" / f"{role}-system-defaults.json"]
    shown = [folder / "inbox" / role, folder / "plan.md", folder / "ticket.md",
             folder / "contracts" / f"{role}.md", folder / "intake",
             folder / "gemini" / f"{role}-system-defaults.json"]
    for pattern in ("diff-*.patch", "gate-*.log", "scan-*.log"):
        shown += sorted(folder.glob(pattern))
    return shown


def gate(*, home: Path, repo: Repo, worktrees: TicketWorktrees, config: Config,
         env: Mapping[str, str]) -> Fence:
    """The gate's fence: its own checkout, at the commit under test, and nothing of the
    ticket's folder."""
    worktree = worktrees.path(GATE)
    fence = _base(worktree, env, home, repo, config, None)
    fence = fence.with_rules(READ, pinned(worktrees, worktree, Kind.REVIEWER))
    return _holes(fence, config)


def setup(*, home: Path, repo: Repo, worktrees: TicketWorktrees, config: Config,
          env: Mapping[str, str], worktree: Path) -> Fence:
    """The fence of a checkout's set-up (post_create): it runs code of the commit the checkout
    is at (a package's install scripts), so it is fenced in as the gate is, with its checkout
    writable (the set-up's output is made there) and what tells git where its configuration
    lives read-only."""
    fence = _base(worktree, env, home, repo, config, None)
    fence = fence.with_rules(READ, pinned(worktrees, worktree, Kind.REVIEWER, setup=True))
    # the checkout's submodules are cloned into its own admin folder's `modules` (made now:
    # a rule holds only for a path that exists); handoff's own git never enters them
    # (`--ignore-submodules=dirty`), so what the set-up writes there steers none of it
    admin = worktrees.admin_dir(worktree)
    if admin is not None and (worktree / ".gitmodules").is_file() and _made(admin / "modules"):
        fence = fence.with_rules(WRITE, [admin / "modules"])
    return _holes(fence, config)


def _base(worktree: Path, env: Mapping[str, str], home: Path, repo: Repo, config: Config,
          provider: Provider | None) -> Fence:
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    fence = Fence(worktree)
    # visible even where the private /tmp or a hidden folder covers them: the tools that run
    # (Python, handoff, the CLI), the home's settings, the repository's git directory and the
    # folders shared into the worktrees
    fence = fence.with_rules(READ, [*_tools(env, provider, user_home), repo.common_dir,
                                    *(repo.top / share.path for share in config.share)])
    # TMPDIR private, as /tmp is: an empty folder of the peer's own where the path is
    scratch = [Path(env["TMPDIR"])] if os.path.isabs(env.get("TMPDIR") or "") else []
    # every ticket's worktrees are hidden, the role's own is bound again below: a peer sees
    # neither another ticket's checkout nor its partner's uncommitted work
    fence = fence.with_rules(HIDE, [home, *sandbox.credentials(user_home), _tmux_dir(),
                                    *scratch, repo.top / WORKTREES_DIR])
    # what a CLI reads of the person's own folder through a link of its (opencode's plugin API)
    fence = fence.with_rules(READ, [target for target in (provider.links(os.environ).values()
                                                          if provider is not None else ())
                                    if target.is_relative_to(user_home / ".config/opencode")])
    fence = fence.with_rules(WRITE, [worktree])
    # the repository's config as git reads it, without the credentials a remote's URL or an
    # extraHeader may hold (handoff.machinery.credentials): written where no peer writes
    clean = credentials.redacted_config(repo.common_dir, home / "redacted" / f"{repo.key}.config")
    return fence.with_overlay(repo.common_dir / "config", clean) if clean is not None else fence


def _tools(env: Mapping[str, str], provider: Provider | None, user_home: Path) -> list[Path]:
    """What stays visible of the machine for the programs to run: the person's home (its
    secrets hidden apart), Python, handoff, the CLI's own folders and every folder of PATH."""
    return [user_home, Path(sys.prefix), Path(sys.base_prefix),
            Path(handoff.__file__).resolve().parent.parent, *_program_dirs(provider),
            *_path_dirs(env)]


def programs_seen(env: Mapping[str, str], home: Path, config: Config,
                  provider: Provider | None = None) -> Fence:
    """The fence as a program to run inside it meets it (a peer's, a scanner), before any
    ticket: what `doctor` and `start` ask whether a program there would be found."""
    user_home = Path(env.get("HOME") or os.path.expanduser("~"))
    fence = Fence(user_home).with_rules(READ, _tools(env, provider, user_home))
    fence = fence.with_rules(HIDE, [home, *sandbox.credentials(user_home)])
    return _holes(fence, config)


def _holes(fence: Fence, config: Config) -> Fence:
    """The person's own holes and extra hidden paths, over handoff's rules."""
    return fence.with_rules(WRITE, config.sandbox.paths("write")).with_rules(
        HIDE, config.sandbox.paths("hide"))


def _git_paths(kind: Kind, repo: Repo, worktrees: TicketWorktrees, worktree: Path) -> list[Path]:
    """What a role's git commands write: for the implementer and the testers, who commit in
    their detached checkouts, their worktree's admin folder (HEAD, index, logs) and the objects
    their commits add. No ref: handoff moves the ticket branch itself. A reviewer writes
    nothing of the git directory."""
    if kind in (Kind.REVIEWER, Kind.PLANNER):
        return []
    admin = worktrees.admin_dir(worktree)
    return [*([admin] if admin is not None else []), repo.common_dir / "objects"]


def pinned(worktrees: TicketWorktrees, worktree: Path, kind: Kind,
           setup: bool = False) -> list[Path]:
    """What stays read-only inside a writable checkout and admin folder: the files that tell
    git where its configuration and hooks live (`.git`, `commondir`, `gitdir`, and
    `config.worktree`, made empty first so that there is one to hold: git reads it when the
    repository has extensions.worktreeConfig), so that a peer cannot point git (its own, or a
    process of the person's that trusts the checkout) at a configuration of its making. For
    whoever runs the code under review (not the implementer, whose checkout is its own, and not
    the set-up, which makes them), also the set-up's output."""
    paths = [worktree / ".git"]
    admin = worktrees.admin_dir(worktree)
    if admin is not None:
        config = admin / "config.worktree"
        if not config.exists() and not config.is_symlink():
            with contextlib.suppress(OSError):
                config.touch(mode=0o600)
        paths += [admin / "commondir", admin / "gitdir", config]
    if kind is not Kind.IMPLEMENTER and not setup:
        paths += [worktree / name for name in worktrees.kept(worktree)]
    return paths


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

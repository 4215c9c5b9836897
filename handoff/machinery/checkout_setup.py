"""The setup of a checkout: the shared folders copied or linked in from the main checkout, then
the config's post_create commands, once per worktree.

post_create runs code of the commit the checkout is made at, so it is fenced in like the gate
when the sandbox is on (`SetupFence`), and bounded in time (`setup_timeout`). handoff's record
of the worktree marks the setup done only once all of it succeeded, and names what it made
(`setup_output`): between rounds a detached checkout is reset to its commit and everything git
does not track is removed but that and the shared folders (`kept`).

Python run in a detached checkout writes no bytecode (`bytecode_env`), so no .pyc of one round
(or one planted by the code under review) is read by the next: the reset removes every ignored
file but the setup's output, and no bytecode folder is shared between checkouts.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.config import Share
from handoff.errors import ExternalFailure, NotFound
from handoff.machinery import proc
from handoff.machinery.checkouts import Checkouts
from handoff.role import IMPLEMENTER

#: a worktree's setup command line, fenced: (the worktree's folder, argv) → what runs instead,
#: for as long as the context lasts (its limits end with it)
SetupFence = Callable[[Path, Sequence[str]], contextlib.AbstractContextManager[list[str]]]


def bytecode_env(role: str) -> dict[str, str]:
    """Python run in a detached checkout (a tester, a reviewer, the gate) writes no
    bytecode: the code under review must not leave a .pyc that a later round, or another
    checkout, reads (a shared bytecode folder once let one ticket's peer make the next
    ticket's gate pass). The standard library's own bytecode, installed beside it, is still
    read. The implementer's checkout is its own, never reset by handoff: Python keeps its
    usual __pycache__ there."""
    return {"PYTHONDONTWRITEBYTECODE": "1"} if role != IMPLEMENTER else {}


@dataclass(frozen=True)
class CheckoutSetup:
    """What sets up each of checkouts' worktrees (the config's shares and post_create)."""

    checkouts: Checkouts
    shares: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()
    #: seconds each post_create command may take (config `setup_timeout`)
    setup_timeout: float = 900.0
    #: more environment for a worktree's post_create, by the worktree's name (its ports)
    setup_env: Callable[[str], Mapping[str, str]] | None = None
    #: what runs a post_create command in the sandbox (None: as the person, sandbox off)
    setup_fence: SetupFence | None = None

    def done(self, path: Path) -> bool:
        return self.checkouts.is_live(path) and \
            bool(self.checkouts.record(path.name).get("setup_done"))

    def run(self, path: Path) -> None:
        """Shared folders and post_create; marked done in handoff's record only once all of it
        succeeded, so a failure is set up again next time."""
        checkouts = self.checkouts
        if not checkouts.is_live(path):
            raise NotFound(f"{path} is not a worktree of {checkouts.repo.top}")
        checkouts.update_record(path.name, setup_done=False)
        self._share(path)
        made: list[str] = []
        commands = self.commands(path)
        if commands:  # nothing else makes files here: no status to ask without them
            before = set(self._untracked(path))
            self._post_create(path, commands,
                              self.setup_env(path.name) if self.setup_env else {})
            made = [name for name in self._untracked(path) if name not in before]
        checkouts.update_record(path.name, setup_output=made, setup_done=True,
                                setup=[list(argv) for argv in commands])

    def commands(self, path: Path) -> tuple[tuple[str, ...], ...]:
        """What sets the checkout up: its submodules first, when its commit has any (each
        worktree is a checkout of its own: git leaves their folders empty), then post_create.
        Run as post_create is, in the setup's fence: .gitmodules is the commit's to say."""
        first = (SUBMODULES,) if (path / ".gitmodules").is_file() else ()
        return (*first, *self.post_create)

    def kept(self, path: Path) -> list[str]:
        """What handoff put beside the checkout and keeps there: the shared folders and the
        output of the worktree's setup."""
        names = [s.path.strip("/") for s in self.shares]
        output = self.checkouts.record(path.name).get("setup_output") \
            if path.parent == self.checkouts.root else []
        if isinstance(output, list):
            names += [name for name in output if isinstance(name, str) and name]
        return names

    def _untracked(self, path: Path) -> list[str]:
        """Entries git does not track, ignored ones too (a setup's .venv, node_modules), a
        wholly untracked folder as one, shared folders aside."""
        out = self.checkouts.pinned_git(path, "status", "--porcelain", "-z",
                                        "--untracked-files=normal", "--ignored=traditional",
                                        "--ignore-submodules=dirty")
        shared = {s.path.strip("/") for s in self.shares}
        names = [item[3:].rstrip("/") for item in out.split("\0") if item[:3] in ("?? ", "!! ")]
        return [n for n in names if not any(n == s or n.startswith(s + "/") for s in shared)]

    def _share(self, path: Path) -> None:
        for share in self.shares:
            source, target = self.checkouts.repo.top / share.path, path / share.path
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

    def _post_create(self, path: Path, commands: tuple[tuple[str, ...], ...],
                     more: Mapping[str, str]) -> None:
        for argv in commands:
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
                if argv == SUBMODULES:
                    raise ExternalFailure(
                        f"the submodules of {path} could not be set up: " + " | ".join(tail),
                        "they are fetched in the setup's sandbox, whose network is open but "
                        "which hides your credentials: make them reachable so (or fetch them "
                        "your way in post_create), then 'handoff resume'; the worktree is kept")
                raise ExternalFailure(
                    f"post_create command {' '.join(argv)} failed in {path}: " + " | ".join(tail),
                    "fix the command in .handoff.yaml, then 'handoff resume' runs the setup "
                    "again; the worktree is kept for you to inspect",
                )


#: what initialises a checkout's submodules (handoff.machinery.checkout_setup.commands)
SUBMODULES = ("git", "submodule", "update", "--init", "--recursive")


def _through_link(top: Path, target: Path) -> bool:
    """A folder between top and target is a link (or not a folder): writing target would land
    where the link points, outside the checkout."""
    folder = target.parent
    while folder != top and top in folder.parents:
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            return True
        folder = folder.parent
    return False

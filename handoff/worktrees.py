"""Git worktrees for a ticket's roles, under <repo>/.worktrees/<TICKET>/<role>.

The implementer works on branch handoff/<TICKET>; the reviewer sits detached at the exact
commit under review. Removal never loses work: a worktree with uncommitted or untracked files
is refused unless forced, and the ticket branch is always kept.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from handoff import proc
from handoff.config import Share
from handoff.errors import ExternalFailure, UsageError, WorkAtRisk
from handoff.repo import Repo, git, git_ok

WORKTREES_DIR = ".worktrees"


def branch_name(ticket: str) -> str:
    return f"handoff/{ticket}"


def registered(repo: Repo) -> set[Path]:
    """Paths of every worktree git knows about for this repo."""
    out = git(repo.top, "worktree", "list", "--porcelain", "-z")
    return {Path(item[len("worktree "):]).resolve()
            for item in out.split("\0") if item.startswith("worktree ")}


@dataclass(frozen=True)
class TicketWorktrees:
    repo: Repo
    ticket: str
    shares: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()

    @property
    def root(self) -> Path:
        return self.repo.top / WORKTREES_DIR / self.ticket

    def path(self, role: str) -> Path:
        return self.root / role

    def _prepare(self, path: Path) -> bool:
        """True when path is already a live worktree (a resume); clears a crashed half-add."""
        if path.resolve() in registered(self.repo):
            if path.is_dir():
                return True
            git(self.repo.top, "worktree", "prune")
        if path.exists() and any(path.iterdir()):
            raise UsageError(f"{path} exists and is not a worktree of {self.repo.top}",
                             "move it out of the way, then try again")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repo.exclude(f"/{WORKTREES_DIR}/")
        return False

    def create_implementer(self, base_commit: str) -> Path:
        path = self.path("implementer")
        if self._prepare(path):
            return path
        branch = branch_name(self.ticket)
        if self.repo.branch_head(branch):
            if not self.repo.is_ancestor(base_commit, branch):
                raise UsageError(
                    f"branch {branch} already exists and does not contain the base commit",
                    f"delete or rename it ('git branch -m {branch} {branch}-old'), or pick "
                    "another ticket id",
                )
            git(self.repo.top, "worktree", "add", str(path), branch)
        else:
            git(self.repo.top, "worktree", "add", "-b", branch, str(path), base_commit)
        self._finish(path)
        return path

    def create_reviewer(self, commit: str) -> Path:
        path = self.path("reviewer")
        if self._prepare(path):
            return path
        git(self.repo.top, "worktree", "add", "--detach", str(path), commit)
        self._finish(path)
        return path

    def _finish(self, path: Path) -> None:
        self._share(path)
        self._post_create(path)

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

    def _post_create(self, path: Path) -> None:
        for argv in self.post_create:
            result = proc.run(argv, cwd=path, timeout=900, check=False)
            if result.returncode != 0:
                tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
                raise ExternalFailure(
                    f"post_create command {' '.join(argv)} failed in {path}: " + " | ".join(tail),
                    "fix the command in .handoff.yaml; the worktree is kept for you to inspect",
                )

    def point_reviewer(self, commit: str, scratch: Path) -> None:
        """Make the reviewer's checkout a pristine copy of commit.

        Anything it left behind is saved to scratch first. Ignored build output goes too (the
        shared folders stay, post_create runs again): a cache keyed by mtime, like Python's
        .pyc for a same-size edit within one second, would otherwise let the gate and the
        reviewer test stale code.
        """
        path = self.path("reviewer")
        if self.save_scratch(path, scratch):
            git(path, "reset", "--hard", "--quiet")
        git(path, "checkout", "--quiet", "--detach", commit)
        keep = [arg for s in self.shares for arg in ("-e", f"/{s.path.strip('/')}")]
        if git(path, "clean", "-ffdxn", *keep):
            git(path, "clean", "-ffdxq", *keep)
            self._post_create(path)

    def save_scratch(self, path: Path, scratch: Path) -> bool:
        """Write a worktree's uncommitted and untracked changes as a patch; False when clean."""
        if not self.dirty(path):
            return False
        git(path, "add", "-A", "--", ".", *[f":!{s.path}" for s in self.shares])
        scratch.parent.mkdir(parents=True, exist_ok=True)
        scratch.write_text(git(path, "diff", "--cached", "--binary", "HEAD") + "\n",
                           encoding="utf-8")
        return True

    def dirty(self, path: Path) -> list[str]:
        """Uncommitted or untracked entries (ignored files and our shared folders aside)."""
        if not path.is_dir():
            return []
        out = git(path, "status", "--porcelain", "-z", "--untracked-files=all")
        shared = {s.path.rstrip("/") for s in self.shares}
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
        return git(self.path(role), "rev-parse", "HEAD")

    def ensure_clean(self, roles: tuple[str, ...] = ("implementer", "reviewer")) -> None:
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
        """Remove one role's worktree; False when it did not exist."""
        path = self.path(role)
        known = path.resolve() in registered(self.repo)
        if not known and not path.exists():
            return False
        if known and not force:
            self.ensure_clean((role,))
        for share in self.shares:
            link = path / share.path
            if link.is_symlink():
                link.unlink()
        if known:
            git(self.repo.top, "worktree", "remove", "--force", str(path))
        elif path.exists():
            shutil.rmtree(path)
        return True

    def remove_all(self, force: bool = False, reviewer_scratch: Path | None = None) -> list[str]:
        """Remove both roles' worktrees (checking all before removing any); the branch stays.

        The reviewer only ever holds a checkout of a commit already on the branch, plus what
        test runs left behind: with reviewer_scratch, that is saved as a patch instead of
        blocking the removal.
        """
        if reviewer_scratch is not None:
            self.save_scratch(self.path("reviewer"), reviewer_scratch)
        if not force:
            self.ensure_clean(("implementer",) if reviewer_scratch else ("implementer", "reviewer"))
        removed = [role for role in ("implementer", "reviewer") if self.remove(role, force=True)]
        for folder in (self.root, self.root.parent):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        git_ok(self.repo.top, "worktree", "prune")
        return removed

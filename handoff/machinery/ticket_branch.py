"""The ticket branch, handoff/<TICKET>: handoff's alone.

No peer writes a ref of the repository. The implementer works detached at the branch's tip,
and handoff alone moves the branch, forward only, to each commit it accepts, taking the
implementer's checkout with it (`advance`). A ticket starts its branch only where none is, or
where the one there is recorded as this HANDOFF_HOME's (`start`): a new ticket never takes over
a branch. A branch that is a symbolic ref is refused, never followed (`tip`). Before the
implementer's checkout goes, its commits that are not on the branch yet go onto it
(`keep_commits`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import ExternalFailure, UsageError
from handoff.inputs import clip
from handoff.machinery.admin_files import read_pointer
from handoff.machinery.checkouts import Checkouts
from handoff.machinery.repo import git
from handoff.machinery.repo_worktrees import RECORDS
from handoff.record.store import atomic_write_json
from handoff.role import IMPLEMENTER


def branch_name(ticket: str) -> str:
    return f"handoff/{ticket}"


@dataclass(frozen=True)
class TicketBranch:
    """The branch of checkouts' ticket, and the implementer's checkout that follows it."""

    checkouts: Checkouts
    #: the HANDOFF_HOME whose ticket this is (recorded with the branch it makes)
    home: Path | None = None

    @property
    def name(self) -> str:
        return branch_name(self.checkouts.ticket)

    def tip(self) -> str:
        """The ticket branch's commit ('' when there is none). A branch that is a symbolic ref
        (a peer made it point at another, e.g. main) is refused: handoff never follows one."""
        ref = f"refs/heads/{self.name}"
        out = git(self.checkouts.repo.top, "for-each-ref", "--format=%(objectname) %(symref)",
                  ref)
        for line in out.splitlines():
            sha, _, target = line.partition(" ")
            if target:
                raise UsageError(f"branch {self.name} is a symbolic ref to {target}: handoff "
                                 "never moves a branch through one",
                                 f"look at it ('git symbolic-ref {ref}'), then delete it "
                                 f"('git symbolic-ref --delete {ref}') and 'handoff resume "
                                 f"{self.checkouts.ticket}'")
            return sha
        return ""

    def record_file(self) -> Path:
        return self.checkouts.repo.common_dir / RECORDS / "branches" / \
            f"{self.checkouts.ticket}.json"

    def made(self) -> bool:
        """handoff made the ticket branch (its record says so, for this HANDOFF_HOME)."""
        try:
            data = json.loads(self.record_file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        home = str(self.home.resolve()) if self.home is not None else ""
        return isinstance(data, dict) and data.get("ticket") == self.checkouts.ticket and \
            data.get("home", "") == home

    def foreign(self) -> str:
        """The commit of a ticket branch handoff did not make ('' when there is none, or it is
        handoff's own): a new ticket never takes one over."""
        tip = self.tip()
        return tip if tip and not self.made() else ""

    def refuse_foreign(self) -> None:
        tip = self.foreign()
        if tip:
            raise UsageError(
                f"branch {self.name} already exists (at {tip[:10]}) and handoff did not "
                f"make it for this ticket: a new ticket never takes over a branch",
                f"look at it ('git log {self.name}'); rename it ('git branch -m "
                f"{self.name} {self.name}-old') or delete it, or pick another ticket id")

    def start(self, base: str) -> str:
        """The ticket branch at base, made now (and recorded as handoff's), or found: its tip."""
        with self.checkouts.lock():
            self.refuse_foreign()
            tip = self.tip()
            if tip:
                return tip
            atomic_write_json(self.record_file(), {
                "ticket": self.checkouts.ticket,
                "home": str(self.home.resolve()) if self.home else "", "base": base})
            git(self.checkouts.repo.top, "update-ref", "--no-deref", "-m",
                "handoff: ticket started", f"refs/heads/{self.name}", base, "0" * len(base))
            return base

    def advance(self, old: str, new: str) -> str:
        """Move the ticket branch from old forward to new (new builds on old), as a plain ref,
        and the implementer's checkout with it (first: when git refuses to overwrite its
        uncommitted work, nothing moves); why not ('' when done). A branch that moved
        meanwhile is not moved again."""
        checkouts = self.checkouts
        with checkouts.lock():
            try:
                tip = self.tip()
            except UsageError as exc:  # a symbolic ref: said, never followed
                return f"{exc.message} ({exc.hint})"
            if tip not in (old, new):
                return (f"the branch {self.name} is at {tip[:10] or 'nothing'}, not "
                        f"{old[:10]}: it moved outside handoff")
            if tip != new and not checkouts.repo.is_ancestor(old, new):
                return f"{new[:10]} does not build on {old[:10]}"
            path = checkouts.path(IMPLEMENTER)
            if checkouts.is_live(path) and checkouts.pinned_git(path, "rev-parse", "HEAD") != new:
                status, out, err = checkouts.pinned_run(path, "checkout", "--quiet", "--detach",
                                                        new, check=False)
                if status != 0:
                    return clip(_said(out, err), 600) or f"git checkout exited {status}"
            if tip != new:
                from handoff.machinery import gitcmd

                status, out, err = gitcmd.run(
                    checkouts.repo.top, ("update-ref", "--no-deref", "-m", "handoff: accepted",
                                         f"refs/heads/{self.name}", new, old), check=False)
                if status != 0:  # e.g. a `.lock` beside the ref, left by a crash or a peer
                    return f"git did not move {self.name}: " + \
                        (clip(_said(out, err), 600) or f"update-ref exited {status}")
        return ""

    def merge_in(self, role: str, at: str, commit: str, message: str) -> list[str]:
        """Check the role's checkout out at `at` (detached) and merge commit into it there, as
        a merge commit: [] when git made it, else the files that conflict, left in the
        checkout with the merge under way for the peer to resolve and commit. Run pinned, as
        all of handoff's git in a checkout; the checkout must be clean (ensure_clean)."""
        checkouts = self.checkouts
        path = checkouts.live(role)
        if checkouts.pinned_git(path, "rev-parse", "HEAD") != at:
            checkouts.pinned_git(path, "checkout", "--quiet", "--detach", at)
        status, out, err = checkouts.pinned_run(path, "merge", "--no-ff", "--no-edit", "-m",
                                                message, commit, check=False)
        if status == 0:
            return []
        conflicts = checkouts.pinned_git(path, "diff", "--name-only",
                                         "--diff-filter=U").splitlines()
        if conflicts:
            return conflicts
        checkouts.pinned_run(path, "merge", "--abort", check=False)
        raise ExternalFailure(f"git could not merge {commit[:10]} into {path}: "
                              f"{clip(_said(out, err), 600) or f'exit {status}'}",
                              "nothing was changed; mend what git names, then run it again")

    def keep_commits(self) -> str:
        """Before the implementer's checkout goes (removed, or found deleted by hand and made
        again): commits it made that handoff has not put on the ticket branch yet go onto it,
        forward only, so no commit is lost with the checkout. Its HEAD is read from the admin
        folder handoff recorded, as data (a full commit id), even when the folder is gone. The
        commit the branch moved to ('' when nothing moved)."""
        repo = self.checkouts.repo
        admin = self.checkouts.record(IMPLEMENTER).get("admin")
        if not isinstance(admin, str) or not admin or "/" in admin or admin in (".", ".."):
            return ""
        head = read_pointer(repo.common_dir / "worktrees" / admin / "HEAD") or ""
        tip = self.tip()
        if not tip or len(head) != len(tip) or head == tip or \
                not all(c in "0123456789abcdef" for c in head) or \
                not repo.commit_exists(head) or not repo.is_ancestor(tip, head):
            return ""
        git(repo.top, "update-ref", "--no-deref", "-m",
            "handoff: the implementer's commits, kept at close", f"refs/heads/{self.name}",
            head, tip)
        return head


def _said(out: str, err: str) -> str:
    """What git said, on one line."""
    return " ".join(line.strip() for line in (err + out).splitlines() if line.strip())

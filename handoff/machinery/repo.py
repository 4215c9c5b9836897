"""The user's git repository, through GitPython with a bound on every call (handoff.machinery.gitcmd)."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.errors import ExternalFailure, MissingTool, NotFound, UsageError
from handoff.record.store import repo_key

if TYPE_CHECKING:
    from handoff.machinery.gitcmd import BoundedGit

def git_env(ceiling: Path | None) -> dict[str, str] | None:
    """What a git call that must not look for a repository above ceiling adds to its
    environment: run in a folder that ought to be a worktree but is not, git fails instead of
    finding (and acting on) the repository around it. None: nothing to add."""
    if ceiling is None:
        return None
    inherited = [p for p in os.environ.get("GIT_CEILING_DIRECTORIES", "").split(os.pathsep) if p]
    return {"GIT_CEILING_DIRECTORIES": os.pathsep.join([*inherited, str(ceiling.resolve())])}


def load_gitpython() -> None:
    """Import GitPython now (it is loaded only when needed: `status` and `submit` never are),
    or say clearly that git is missing."""
    try:
        from handoff.machinery import gitcmd  # noqa: F401
    except ImportError as exc:  # GitPython's import runs `git version`, and fails without git
        raise MissingTool("git is not installed or not on PATH", "install git and try again") from exc


def run(cwd: Path, *args: str, ceiling: Path | None = None, check: bool = True,
        timeout: float | None = None) -> tuple[int, str]:
    """(status, stdout) of one git command in cwd; imports GitPython only now (see gitcmd)."""
    load_gitpython()
    from handoff.machinery import gitcmd

    status, out, _ = gitcmd.run(cwd, args, timeout=timeout, env=git_env(ceiling), check=check)
    return status, out


def git(cwd: Path, *args: str, check: bool = True, timeout: float | None = None,
        ceiling: Path | None = None) -> str:
    """Run one git command in cwd and return its stdout (stripped of the final newline).

    ceiling: see `git_env`."""
    return run(cwd, *args, ceiling=ceiling, check=check, timeout=timeout)[1].rstrip("\n")


def git_ok(cwd: Path, *args: str, ceiling: Path | None = None) -> bool:
    return run(cwd, *args, ceiling=ceiling, check=False)[0] == 0


@dataclass(frozen=True)
class Checkout:
    #: the commit checked out ('' on a branch with no commit yet)
    head: str
    #: changed or untracked paths
    changes: int


#: a full object name (sha1 or sha256): what names one commit for ever
FULL_NAME = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
#: the ancestries found, by repository: (common dir, older, newer)
_ANCESTRY: set[tuple[str, str, str]] = set()
ANCESTRY_KEPT = 4096


@dataclass(frozen=True)
class Repo:
    """A repository as handoff sees it: its top-level folder and its shared git dir."""

    top: Path
    common_dir: Path

    @classmethod
    def at(cls, path: Path) -> Repo:
        """The repository holding path, found by GitPython as git finds it (no git process)."""
        if not path.is_dir():
            raise NotFound(f"{path} is not a folder")
        load_gitpython()
        from handoff.machinery import gitcmd

        with gitcmd.opened(path) as found:
            top, common = found.working_tree_dir, found.common_dir
        if top is None:
            raise UsageError(f"{path} is in a bare repository (no checkout to work in)",
                             "run handoff inside a repo with a working tree, or pass --repo PATH")
        return cls(top=Path(top).resolve(), common_dir=Path(common).resolve())

    @property
    def git(self) -> BoundedGit:
        """GitPython's command API at top (`repo.git.worktree("add", …)`), bounded."""
        load_gitpython()
        from handoff.machinery.gitcmd import BoundedGit

        return BoundedGit(self.top)

    @property
    def key(self) -> str:
        """The same for the main checkout and every linked worktree of it."""
        common = self.common_dir
        return repo_key(common, common.parent if common.name == ".git" else common)

    def resolve(self, rev: str) -> str:
        """The full sha of rev, or a clear error naming it."""
        status, out = run(self.top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}",
                          check=False)
        if status != 0:
            raise UsageError(f"{rev!r} is not a commit in {self.top}",
                             "pass --base with a branch, tag or commit that exists")
        return out.strip()

    def paths_at(self, commit: str) -> frozenset[str]:
        """Every file and folder of commit's tree (a planner's claims are checked against the
        base as git holds it, never against a checkout a peer could have changed)."""
        out = git(self.top, "ls-tree", "-r", "-z", "--name-only", commit)
        files = [path for path in out.split("\0") if path]
        folders = {"/".join(parts[:i]) for path in files
                   for parts in (path.split("/"),) for i in range(1, len(parts))}
        return frozenset({*files, *folders})

    def commit_exists(self, sha: str) -> bool:
        return git_ok(self.top, "cat-file", "-e", f"{sha}^{{commit}}")

    def is_ancestor(self, older: str, newer: str) -> bool:
        """older is newer or one of its ancestors. A yes about two full object names is kept:
        commits never change, and an accepted report's is asked twice (its validators, then
        the branch's move), on the hand-over's path."""
        known = (str(self.common_dir), older, newer)
        if known in _ANCESTRY:
            return True
        found = git_ok(self.top, "merge-base", "--is-ancestor", older, newer)
        if found and FULL_NAME.fullmatch(older) and FULL_NAME.fullmatch(newer):
            if len(_ANCESTRY) >= ANCESTRY_KEPT:
                _ANCESTRY.clear()
            _ANCESTRY.add(known)
        return found

    def branch_head(self, branch: str) -> str:
        status, out = run(self.top, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}",
                          check=False)
        return out.strip() if status == 0 else ""

    def diff(self, base: str, commit: str) -> str:
        return git(self.top, "diff", "--binary", f"{base}...{commit}")

    def readable_diff(self, base: str, commit: str) -> str:
        """base...commit for a person to read (`handoff diff`, the board): renames found, and
        whatever the person's git config says, no external diff or textconv program runs."""
        return git(self.top, "diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                   f"{base}...{commit}")

    def changed_paths(self, base: str, commit: str) -> list[str]:
        """Every path the commit's side changed since base (a rename names both its ends)."""
        out = git(self.top, "diff", "--name-only", "--no-renames", "-z", f"{base}...{commit}")
        return [path for path in out.split("\0") if path]

    def line_diff(self, base: str, commit: str) -> str:
        """base...commit with no context and renames found (handoff.protocol.diffs reads it):
        what lines a change touched, a moved file not taken for a deleted one. Whatever the
        person's git config says: no textconv program runs, the a/ b/ prefixes stay."""
        return git(self.top, "diff", "-U0", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                   "--src-prefix=a/", "--dst-prefix=b/", f"{base}...{commit}")

    def present_changes(self, base: str, commit: str) -> list[str]:
        """The paths the commit's side changed since base that exist at commit (what a
        scanner can scan: a deleted file is not there)."""
        out = git(self.top, "diff", "--name-only", "--no-renames", "--diff-filter=d", "-z",
                  f"{base}...{commit}")
        return [path for path in out.split("\0") if path]

    def diffstat(self, base: str, commit: str) -> list[tuple[str, int, int]]:
        """(path, added, removed) per file changed between base and commit."""
        out = git(self.top, "diff", "--numstat", f"{base}...{commit}")
        rows = []
        for line in out.splitlines():
            added, removed, path = line.split("\t", 2)
            rows.append((path, int(added) if added.isdigit() else 0,
                         int(removed) if removed.isdigit() else 0))
        return rows

    def merge_conflicts(self, ours: str, theirs: str) -> list[str] | None:
        """The files that conflict when theirs is merged into ours, worked out in the object
        store alone (`git merge-tree --write-tree`: no index, no checkout is touched); None
        when they merge cleanly. ExternalFailure when git cannot say (older than 2.38)."""
        return self.merge(ours, theirs)[1]

    def merge(self, ours: str, theirs: str) -> tuple[str, list[str] | None]:
        """The tree of theirs merged into ours, written to the object store only, and the
        files that conflict (None: none, the tree is the merge)."""
        status, out = run(self.top, "merge-tree", "--write-tree", "--name-only", "--no-messages",
                          ours, theirs, check=False)
        lines = out.strip().splitlines()
        if status == 0 and lines:
            return lines[0], None
        if status == 1 and lines:
            return lines[0], sorted(set(lines[1:]))
        raise ExternalFailure(f"git merge-tree could not merge {short_sha(theirs)} into "
                              f"{short_sha(ours)}: {out.strip()[-300:] or f'exit {status}'}",
                              "handoff needs git 2.38 or newer (merge-tree --write-tree)")

    def merge_drivers(self, trees: Sequence[str], paths: Sequence[str]) -> dict[str, str]:
        """path → the merge driver the attributes give it at any of trees (their .gitattributes,
        with the repository's info/attributes and the person's core.attributesFile), for the
        paths whose merge is not git's own line merge: `union`, which never conflicts, or a
        driver the configuration names, whose "clean" is only its own word. Each tree is read
        into an index of its own in a temporary folder; no checkout or index of the person's
        is touched."""
        load_gitpython()
        from handoff.machinery import gitcmd

        found: dict[str, str] = {}
        if not paths:
            return found
        with tempfile.TemporaryDirectory(prefix="handoff-attrs-") as scratch:
            for tree in dict.fromkeys(trees):
                env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
                gitcmd.run(self.top, ("read-tree", tree), env=env)
                out = gitcmd.run(self.top, ("check-attr", "--cached", "-z", "merge", "--",
                                            *paths), env=env)[1]
                fields = out.split("\0")
                for path, _, value in zip(fields[0::3], fields[1::3], fields[2::3], strict=False):
                    if value not in ("unspecified", "set", "unset", "text", "binary"):
                        found.setdefault(path, value)
        return found

    def main_checkout(self) -> Path:
        """The repository's main checkout (git lists it first), whichever worktree runs."""
        first = git(self.top, "worktree", "list", "--porcelain", "-z").split("\0")[0]
        return Path(first[len("worktree "):])

    def base_of(self, base: str) -> str:
        """The branch a ticket started with --base merges into: base when it names a branch,
        else the branch checked out in the main checkout ('' when none is)."""
        named = base.removeprefix("refs/heads/")
        if base != "HEAD" and self.branch_head(named):
            return named
        return self.current_branch(self.main_checkout())

    def current_branch(self, checkout: Path) -> str:
        """The branch checked out in checkout ('' when its HEAD is detached)."""
        status, out = run(checkout, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return out.strip() if status == 0 else ""

    def checkout(self) -> Checkout:
        """The checkout's HEAD commit and how many changed or untracked paths it holds (ignored
        files aside): one git process for what a `start` needs of it, where rev-parse and
        status would be two."""
        out = git(self.top, "status", "--porcelain=v2", "--branch", "--no-ahead-behind",
                  "--untracked-files=normal")
        head, changes = "", 0
        for line in out.splitlines():  # without -z a path is quoted: one line per path
            if line.startswith("# branch.oid "):
                oid = line.split()[2]
                head = oid if oid != "(initial)" else ""
            elif line and not line.startswith("#"):
                changes += 1
        return Checkout(head, changes)

    def exclude(self, pattern: str) -> None:
        """Add pattern to info/exclude once: the shared git dir's, what `git rev-parse
        --git-path info/exclude` names from the main checkout and every worktree alike (the
        environment that could move it, GIT_COMMON_DIR, is dropped: `git_env`)."""
        path = self.common_dir / "info" / "exclude"
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if pattern not in existing:
            with path.open("a", encoding="utf-8") as handle:
                if existing and existing[-1] != "":
                    handle.write("\n")
                handle.write(f"{pattern}\n")


def short_sha(sha: str) -> str:
    """A commit as handoff shows it to people."""
    return sha[:10]


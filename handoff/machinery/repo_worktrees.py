"""The worktrees of one repository, whoever made them: where handoff's go (`WORKTREES_DIR`),
which git knows (`registered`), which are the person's own (`person_checkouts`), and what
handoff keeps about those it made (`RECORDS`, `records`).

handoff's records live beside git's, in the common dir, never in a worktree's admin folder:
a peer writes its own admin folder, and a record there could name any folder as handoff's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from handoff.machinery.admin_files import read_pointer, real_dir, same_path
from handoff.machinery.repo import Repo
from handoff.machinery.worktree_lock import repo_lock

WORKTREES_DIR = ".worktrees"
#: handoff's records of the worktrees it made, in the common dir:
#: <common>/handoff/worktrees/<ticket>/<name>.json, and the branches it made:
#: <common>/handoff/branches/<ticket>.json
RECORDS = Path("handoff")


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
    mine = {str(data.get("admin")) for data in records(common) if data.get("admin")}
    candidates = [(common / "HEAD", repo.main_checkout())]
    folder = common / "worktrees"
    if real_dir(folder):
        for admin in sorted(folder.iterdir()):
            if admin.name in mine or not real_dir(admin):
                continue
            said = read_pointer(admin / "gitdir") or ""
            top = Path(os.path.normpath(said)).parent if said else None
            if top is None or same_path(str(top.parent.parent), repo.top / WORKTREES_DIR):
                continue  # an older release's worktree of a ticket: never a person's
            candidates.append((admin / "HEAD", top))
    for head, top in candidates:
        text = read_pointer(head) or ""
        if text.startswith("ref: refs/heads/"):
            found.setdefault(text[len("ref: refs/heads/"):], top)
    return found


def records(common: Path) -> list[dict[str, object]]:
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

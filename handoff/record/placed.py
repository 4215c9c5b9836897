"""Which tickets run on another machine (a host), as this machine remembers them.

A ticket placed on a host has its whole record there (its ticket directory, worktrees, tmux,
orchestrator); here is only where to find it: `$HANDOFF_HOME/placed/<ticket>.json`, written
before the host is asked to start it (so a crash in between still leaves a trace that `status`
shows and `close` clears) and removed once it is closed there. Ticket ids are unique across
this machine and its hosts: `start` refuses an id in use on either side.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from handoff.record.store import atomic_write_json, private_dir

FOLDER = "placed"


@dataclass(frozen=True)
class Placement:
    ticket: str
    #: the host's name in config.yaml
    host: str
    #: the local repository it was started from, where `finish` merges it
    repo: str
    #: the repository's copy on the host that handoff owns (its path there)
    mirror: str
    #: what it started from, as given and as the commit pushed
    base: str
    base_commit: str
    #: the base branch it goes back to (the local branch `base` named, or the current one)
    base_branch: str = ""


def path(home: Path, ticket: str) -> Path:
    return home / FOLDER / f"{ticket}.json"


def save(home: Path, placement: Placement) -> None:
    private_dir(home)
    private_dir(home / FOLDER)
    atomic_write_json(path(home, placement.ticket), asdict(placement))


def load(home: Path, ticket: str) -> Placement | None:
    """The ticket's placement, None when it runs here (or nowhere); a damaged file is None
    too, and `every` names it."""
    try:
        data = json.loads(path(home, ticket).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    names = {f.name for f in fields(Placement)}
    if not isinstance(data, dict) or not {"ticket", "host", "repo", "mirror"} <= data.keys():
        return None
    return Placement(**{k: str(v) for k, v in data.items() if k in names})


def every(home: Path) -> list[Placement]:
    """Every ticket placed on a host, by ticket id."""
    folder = home / FOLDER
    if not folder.is_dir():
        return []
    found = (load(home, item.stem) for item in sorted(folder.glob("*.json")))
    return [placement for placement in found if placement is not None]


def forget(home: Path, ticket: str) -> None:
    path(home, ticket).unlink(missing_ok=True)

"""Role contracts: what a role owns, what it must not do, and exactly how it hands off.

A contract is the role's own file, the engineering rules both roles share, and the repo's
own additions (`.handoff/local-<role>.md`), written once per ticket into the ticket
directory. CLIs with a system-prompt mechanism read it from there; the others get it in
their brief.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from handoff.errors import UsageError
from handoff.record.store import atomic_write

LOCAL_DIR = ".handoff"
#: a repo's addition is prose for a model, not a dump: more than this is refused
LOCAL_LIMIT = 32 * 1024


def shipped(name: str) -> str:
    return resources.files("handoff.roles").joinpath(f"{name}.md").read_text(encoding="utf-8")


def local_addition(repo_top: Path, role: str) -> str:
    path = repo_top / LOCAL_DIR / f"local-{role}.md"
    if not path.is_file():
        return ""
    data = path.read_bytes()
    if len(data) > LOCAL_LIMIT:
        raise UsageError(f"{path} is {len(data)} bytes; a role addition may hold at most "
                         f"{LOCAL_LIMIT}", "shorten it: it goes into every brief or prompt")
    return data.decode("utf-8", errors="replace")


def compose(repo_top: Path, role: str) -> str:
    parts = [shipped(role).strip(), shipped("engineering").strip()]
    local = local_addition(repo_top, role).strip()
    if local:
        parts.append(f"# This repository's own rules for the {role}\n\n{local}")
    return "\n\n".join(parts) + "\n"


def write(folder: Path, repo_top: Path, role: str) -> Path:
    """The role's contract as a file in the ticket directory (rewritten when it changed)."""
    path = folder / "contracts" / f"{role}.md"
    text = compose(repo_top, role)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        atomic_write(path, text)
    return path

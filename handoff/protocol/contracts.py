"""Role contracts: what a role owns, what it must not do, and exactly how it hands off.

A contract is its kind's own file (implementer, tester, reviewer), a reviewer's speciality (a
shipped focus, `roles/reviewer-<focus>.md`, or the project's own file named by `contract:`),
the engineering rules every role shares, and the repo's own additions for the role
(`.handoff/local-<role>.md`), written into the ticket directory. CLIs with a system-prompt
mechanism read it from there; the others get it in their brief. A speciality adds to its
kind's rules and never replaces them: how a role hands back stays handoff's.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from handoff.errors import UsageError
from handoff.record.store import atomic_write
from handoff.role import Kind, kind_named

LOCAL_DIR = ".handoff"
#: a repo's addition is prose for a model, not a dump: more than this is refused
LOCAL_LIMIT = 32 * 1024


def shipped(name: str) -> str:
    return resources.files("handoff.roles").joinpath(f"{name}.md").read_text(encoding="utf-8")


def local_addition(repo_top: Path, role: str) -> str:
    return _repo_file(repo_top / LOCAL_DIR / f"local-{role}.md", missing_ok=True)


def _repo_file(path: Path, missing_ok: bool) -> str:
    """A contract text from the repository, bounded (it goes into every brief or prompt)."""
    if not path.is_file():
        if missing_ok:
            return ""
        raise UsageError(f"the role contract {path} does not exist",
                         "commit it to the repository, or drop 'contract:' from the role")
    data = path.read_bytes()
    if len(data) > LOCAL_LIMIT:
        raise UsageError(f"{path} is {len(data)} bytes; a role addition may hold at most "
                         f"{LOCAL_LIMIT}", "shorten it: it goes into every brief or prompt")
    return data.decode("utf-8", errors="replace")


def compose(repo_top: Path, role: str, kind: Kind | None = None, focus: str = "",
            contract: str = "") -> str:
    """The contract of role (of kind; by default the kind its name says), with its focus or
    the project's own contract file (a path in the repository)."""
    kind = kind or kind_named(role) or Kind.REVIEWER
    parts = [shipped(kind).strip()]
    if focus:
        parts.append(shipped(f"{kind}-{focus}").strip())
    if contract:
        parts.append(_repo_file(repo_top / contract, missing_ok=False).strip())
    parts.append(shipped("engineering").strip())
    if role != kind:  # the role's own name, where its kind's contract says who it is
        parts[0] = re.sub(rf"You are (?:the|a) \*\*{kind}\*\*", f"You are **{role}**, a {kind},",
                          parts[0], count=1)
    local = local_addition(repo_top, role).strip()
    if local:
        parts.append(f"# This repository's own rules for the {role}\n\n{local}")
    return "\n\n".join(parts) + "\n"


def write(folder: Path, repo_top: Path, role: str, kind: Kind | None = None, focus: str = "",
          contract: str = "") -> Path:
    """The role's contract as a file in the ticket directory (rewritten when it changed)."""
    path = folder / "contracts" / f"{role}.md"
    text = compose(repo_top, role, kind, focus, contract)
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        atomic_write(path, text)
    return path

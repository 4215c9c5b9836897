"""Control files: what steers handoff or the peers themselves, which a ticket may not change
unless a person said so.

A commit that rewrites `.handoff.yaml` changes the gate's command and the roles of every later
ticket; one that rewrites `CLAUDE.md` or `.codex/` instructs every later peer; a workflow runs
with the repository's CI secrets. So a ticket's commit that touches one goes to a person,
naming the files, unless the plan lists them under `may_change:` (the person approved that
plan) or a person already answered for them. This holds with the sandbox off too: it reads
git's record of the commit, not what the peer could reach.

Patterns, as in `protected:` of the config and `may_change:` of a plan:

* `name` (no slash): a file or folder of that name at any depth (`CLAUDE.md`, `AGENTS.md`);
* `path/` : everything under that folder from the repository's top (`.github/workflows/`);
* `path` with a slash: that exact file, or everything under it when it is a folder;
* `*`, `?` and `[…]` glob one path segment (`docs/*.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

#: what handoff always protects (the config's `protected:` adds to it, never removes)
DEFAULT = (".handoff.yaml", ".handoff/", "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md",
           "GEMINI.md", ".claude/", ".codex/", ".gemini/", ".opencode/", "opencode.json",
           ".mcp.json", ".github/workflows/", ".gitattributes", ".gitmodules")


def matches(pattern: str, path: str) -> bool:
    """path (relative, '/'-separated, as git names it) is under pattern."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    parts = path.split("/")
    if "/" not in pattern.rstrip("/"):
        name = pattern.rstrip("/")
        # a folder pattern (`.claude/`) at the top; a plain name anywhere
        if pattern.endswith("/"):
            return fnmatchcase(parts[0], name) and len(parts) > 1
        return any(fnmatchcase(part, name) for part in parts)
    want = pattern.strip("/").split("/")
    if len(parts) < len(want):
        return False
    if not all(fnmatchcase(part, w) for part, w in zip(parts, want, strict=False)):
        return False
    return (len(parts) == len(want) and not pattern.endswith("/")) or len(parts) > len(want)


def touched(changed: Iterable[str], protected: Sequence[str],
            allowed: Sequence[str] = ()) -> list[str]:
    """The changed paths a pattern of protected names and none of allowed does, sorted."""
    return sorted({path for path in changed
                   if any(matches(p, path) for p in protected)
                   and not any(matches(a, path) for a in allowed)})

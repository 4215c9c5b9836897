"""Credentials a git config may hold, taken out of what handoff says and of what peers read.

A remote's URL may carry a token (`https://user:token@host/repo.git`), and so may a
`url.<base>.insteadOf` section's name or an `http.extraHeader`. The repository's config is
readable in every peer's fence (git needs it), so where it holds such a thing the fences show
a copy without them in its place (handoff.loop.fences), and no message or event of handoff's
repeats one (handoff.operations.forge).
"""

from __future__ import annotations

import re
from pathlib import Path

from handoff.record.store import atomic_write

#: the userinfo of a URL (`https://user:token@host/…`)
USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s\"']+@")
#: an http.extraHeader value (an Authorization header) in a git config file
EXTRA_HEADER = re.compile(r"(?im)^(\s*extraheader\s*=).*$")
#: how large a config is read (a larger one is shown as it is: git reads it anyway)
LIMIT = 1024 * 1024


def redact(text: str) -> str:
    """text with every URL's userinfo and every extraHeader value taken out."""
    return EXTRA_HEADER.sub(r"\1 [taken out by handoff]", USERINFO.sub(r"\1", text))


def redacted_config(common_dir: Path, into: Path) -> Path | None:
    """A copy of the repository's config without credentials, written to into for the fences
    to show in its place; None when it holds none (the config itself is shown then)."""
    source = common_dir / "config"
    try:
        if source.stat().st_size > LIMIT:
            return None
        text = source.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    clean = redact(text)
    if clean == text:
        return None
    atomic_write(into, clean)
    return into

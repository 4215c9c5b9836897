"""Which handoff this is: its published version, and a digest of its code that tells two
installations of one version apart (an edited checkout, a half-done upgrade). A host runs the
same handoff as this machine or none of its tickets (handoff.operations.remote)."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

#: the name handoff is published under (pyproject.toml), whose metadata holds its version
DISTRIBUTION = "tmux-handoff"


@functools.cache
def version() -> str:
    """The installed distribution's version; the source tree's when run uninstalled."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed(DISTRIBUTION)
    except PackageNotFoundError:
        from handoff import __version__

        return __version__


@functools.cache
def code_digest() -> str:
    """sha256 of the package's code (every .py, its roles and hooks), by path within it: the
    same on two machines exactly when they run the same code."""
    package = Path(__file__).resolve().parent
    hasher = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in (".pyc",) or not path.is_file() or "__pycache__" in path.parts:
            continue
        hasher.update(path.relative_to(package).as_posix().encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()[:16]

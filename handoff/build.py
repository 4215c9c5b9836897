"""Which handoff this is: its published version, and a digest of its code that tells two
installations of one version apart (an edited checkout, a half-done upgrade). A host runs the
same handoff as this machine or none of its tickets (handoff.operations.remote)."""

from __future__ import annotations

import functools
import hashlib
import importlib
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


#: the resource packages a wheel ships inside handoff/ (an editable install finds them in the
#: checkout's roles/ and hooks/), with the files pyproject.toml leaves out of a wheel
RESOURCES: dict[str, tuple[str, ...]] = {"roles": (), "hooks": ("hooks.json", "plugin-signal")}


@functools.cache
def code_digest() -> str:
    """sha256 of the code handoff runs (every module, its roles and hooks), by path within the
    package: the same on two machines exactly when they run the same code, installed from a
    wheel or editable from a checkout (whose other files, build output or an editor's, do not
    count)."""
    package = Path(__file__).resolve().parent
    found: dict[str, Path] = {
        path.relative_to(package).as_posix(): path for path in package.rglob("*.py")
        if "__pycache__" not in path.parts and path.relative_to(package).parts[0] not in RESOURCES}
    for name, left_out in RESOURCES.items():
        folder = Path(str(importlib.import_module(f"handoff.{name}").__file__)).resolve().parent
        for path in folder.iterdir():
            if path.is_file() and path.suffix != ".pyc" and path.name not in left_out:
                found[f"{name}/{path.name}"] = path
    hasher = hashlib.sha256()
    for name, path in sorted(found.items()):
        hasher.update(name.encode() + b"\0")
        hasher.update(path.read_bytes() + b"\0")
    return hasher.hexdigest()[:16]

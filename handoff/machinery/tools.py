"""The programs handoff drives, and the oldest versions that do what it relies on."""

from __future__ import annotations

import os
import re
import shutil

from handoff.machinery import proc

#: git 2.31: `rev-parse --path-format=absolute`; tmux 3.0: a command given as several
#: arguments is executed directly, without a shell.
MINIMUM = {"git": (2, 31), "tmux": (3, 0)}
VERSION_FLAG = {"git": "--version", "tmux": "-V"}


#: the versions already asked, by the binary's path and what its file is: a process asks each
#: once, and the warm process's children (handoff.cli.warm) not at all while the binary is
#: the same file (an upgrade replaces it, and is asked again)
_asked: dict[tuple[str, int, int, int], tuple[int, int] | None] = {}


def version(tool: str) -> tuple[int, int] | None:
    """(major, minor) of an installed tool, or None when it is missing or says no version."""
    path = shutil.which(tool)
    if path is None:
        return None
    try:
        st = os.stat(path)
        known = (path, st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        return None
    if known not in _asked:
        out = proc.run([path, VERSION_FLAG[tool]], timeout=10, check=False).stdout
        match = re.search(r"(\d+)\.(\d+)", out)
        _asked[known] = (int(match.group(1)), int(match.group(2))) if match else None
    return _asked[known]


def problems() -> list[str]:
    """What is missing or too old, one line each (empty when all is well)."""
    found = []
    for tool, minimum in MINIMUM.items():
        have = version(tool)
        need = ".".join(map(str, minimum))
        if have is None:
            found.append(f"{tool} is not installed (handoff needs {tool} {need} or newer)")
        elif have < minimum:
            found.append(f"{tool} {have[0]}.{have[1]} is too old (handoff needs {need} or newer)")
    return found

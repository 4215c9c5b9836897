"""Where handoff keeps its state: $HANDOFF_HOME, else the XDG state folder.

Standard library only, without pathlib: every relayed command (handoff.machinery.relay) asks it
before anything else is loaded. handoff.record.store.state_home is the same as a Path.
"""

from __future__ import annotations

import os


def state_home_path() -> str:
    """$HANDOFF_HOME, else the XDG state dir: never inside a repo, never under /tmp by default."""
    explicit = os.environ.get("HANDOFF_HOME")
    if explicit:
        return os.path.realpath(os.path.expanduser(explicit))
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(xdg):  # the XDG spec: relative values are invalid and ignored
        xdg = os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.realpath(os.path.join(xdg, "handoff"))

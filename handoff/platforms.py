"""Where handoff runs, and which of its guarantees are weaker where it is not tested.

Linux is where handoff is built and tested: CI runs the whole suite there with real tmux, git,
bubblewrap and the coding CLIs. WSL2 is a real Linux kernel, so handoff takes the same paths
there, but no machine here runs WSL2: it is not tested. macOS is built for (processes through
psutil, file events through watchdog, flock for the ticket lock) and not tested here either.
Native Windows has no tmux and no POSIX process groups or file locks: `handoff` refuses it in
one line before it imports anything that needs them.
"""

from __future__ import annotations

import os
import sys

#: where the peers' sandbox, pidfds, inotify and the socket trick are Linux's own
_MAC_WEAKER = (
    "peers run unsandboxed: the sandbox is bubblewrap, which needs Linux (sandbox: off says "
    "you know)",
    "a peer's exit is seen within 0.5 s by looking, not at once (no pidfds)",
    "file events come through watchdog (FSEvents), which wakes an orchestrator more slowly than "
    "inotify does on Linux",
    "a ticket directory longer than about 100 bytes takes no reports through its socket (Linux "
    "reaches it through /proc/self/fd): the peer's own `handoff submit` judges them instead; "
    "keep HANDOFF_HOME short",
)


class Platform:
    """This machine as handoff sees it. (A plain class, not a dataclass: every command asks
    for it first, and `dataclasses` would cost each `handoff submit` a third of its start.)"""

    __slots__ = ("machine", "name", "refused", "release", "tested", "weaker")

    def __init__(self, name: str, release: str, machine: str, *, tested: bool,
                 weaker: tuple[str, ...] = (), refused: str = "") -> None:
        #: Linux, WSL2, WSL1, macOS, Windows, or the system's own name
        self.name = name
        self.release = release
        self.machine = machine
        #: CI runs the whole suite here
        self.tested = tested
        #: what handoff does less well here, each with why
        self.weaker = weaker
        #: why handoff does not run here at all ('' where it does)
        self.refused = refused

    def __repr__(self) -> str:
        return f"Platform({self.name!r}, {self.release!r}, tested={self.tested})"

    @property
    def said(self) -> str:
        """One line for doctor: the platform and whether it is tested."""
        where = " ".join(part for part in (self.name, self.release, self.machine) if part)
        if self.tested:
            return f"{where}: tested (CI runs the whole suite on Linux)"
        return f"{where}: not tested here" + (f"; weaker: {'; '.join(self.weaker)}"
                                              if self.weaker else "")


def of(system: str, release: str, machine: str = "") -> Platform:
    """The platform named by sys.platform, the kernel's release and the machine (pure)."""
    if system.startswith("linux"):
        if "microsoft" in release.lower():
            if "wsl2" in release.lower():
                return Platform("WSL2", release, machine, tested=False, weaker=(
                    "none known: a real Linux kernel, the same paths as Linux",))
            return Platform("WSL1", release, machine, tested=False, weaker=(
                "WSL1 translates Linux's system calls rather than running its kernel: handoff "
                "is built for WSL2 (wsl --set-version <distribution> 2)",))
        return Platform("Linux", release, machine, tested=True)
    if system == "darwin":
        return Platform("macOS", release, machine, tested=False, weaker=_MAC_WEAKER)
    if system in ("win32", "cygwin", "msys"):
        return Platform("Windows", release, machine, tested=False, refused=(
            "handoff does not run on native Windows: it needs tmux, POSIX process groups and "
            "file locks"))
    return Platform(system, release, machine, tested=False, weaker=(
        "handoff is built for Linux and macOS; here nothing is known to work",
        "peers run unsandboxed: the sandbox is bubblewrap, which needs Linux"))


def here() -> Platform:
    if not hasattr(os, "uname"):  # native Windows
        return of(sys.platform, "", "")
    uname = os.uname()
    return of(sys.platform, uname.release, uname.machine)


#: what to do instead, on a platform that is refused
REFUSED_HINT = "run handoff inside WSL2 (wsl --install), where it runs as on Linux"

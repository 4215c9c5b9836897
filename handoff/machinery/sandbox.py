"""A peer fenced in with bubblewrap: the filesystem read-only but for what its work needs, the
credential folders empty, a private /tmp, and a PID namespace of its own.

A `Fence` says what one process may see and touch; `wrap` turns it into a `bwrap` command line
around the process's argv (the launcher execs it, so the pane's pid is bwrap's and the
orchestrator's pidfd, reaper and `/proc` reads follow the peer from outside, where every pid of
the sandbox is visible). The policy (which paths a role needs) is `handoff.loop.fences`.

Mounts are laid out shallow to deep, so a deeper rule wins inside a shallower one: the
repository's git directory read-only, its objects writable; the handoff home hidden, the
ticket's folder (or what the role reads of it) visible again, its drafts writable and its
grants hidden.
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

READ, WRITE, HIDE = "read", "write", "hide"

#: what never reaches a peer, under the person's home: keys, tokens, cloud and registry logins
HIDDEN_IN_HOME = (".ssh", ".aws", ".azure", ".config/gcloud", ".config/gh", ".config/hub",
                  ".netrc", ".git-credentials", ".config/git/credentials", ".docker", ".kube",
                  ".gnupg", ".password-store", ".pypirc", ".npmrc", ".gem/credentials",
                  ".cargo/credentials", ".cargo/credentials.toml", ".terraform.d",
                  ".config/op", ".vault-token", ".local/share/keyrings")
#: the person's own coding-CLI folders (logins, sessions, settings): every peer's CLI runs on a
#: copy of its own (handoff.providers.clistate), so none sees the person's, whichever CLI it runs
CLI_HOMES = (".claude", ".claude.json", ".codex", ".gemini", ".config/opencode",
             ".local/share/opencode")
#: sockets outside the home that hand out power over the machine
HIDDEN_ELSEWHERE = ("/var/run/docker.sock", "/run/docker.sock", "/run/podman")


@dataclass(frozen=True)
class Fence:
    """What one sandboxed process may see and touch. `read` paths stay visible read-only where
    a private /tmp or a hidden folder would cover them; `write` ones are writable; `hide` ones
    are emptied. Later rules for the same path win."""

    workdir: Path
    rules: tuple[tuple[str, Path], ...] = ()
    #: (where, what): a file shown read-only in the place of another, after every rule (a
    #: copy of the repository's config without its credentials: handoff.machinery.credentials)
    overlays: tuple[tuple[Path, Path], ...] = ()

    def with_rules(self, kind: str, paths: Iterable[Path]) -> Fence:
        return Fence(self.workdir, (*self.rules, *((kind, Path(p)) for p in paths)),
                     self.overlays)

    def with_overlay(self, where: Path, what: Path) -> Fence:
        return Fence(self.workdir, self.rules, (*self.overlays, (where, what)))

    def laid_out(self) -> list[tuple[str, Path]]:
        """The rules that take effect, one per existing path, shallow to deep."""
        chosen: dict[Path, str] = {}
        for kind, path in self.rules:
            real = Path(os.path.realpath(path))
            if not os.path.lexists(real):
                continue  # nothing to show or hide, and no mount point for it in a read-only root
            chosen.pop(real, None)
            chosen[real] = kind
        order = sorted(enumerate(chosen.items()), key=lambda item: (len(item[1][0].parts),
                                                                    item[0]))
        return [(kind, path) for _, (path, kind) in order]

    def hides(self, path: str | Path) -> str:
        """Why path would not be seen from inside the fence ('' when it would): the deepest
        rule over it hides it, or no rule shows it again under the private /tmp."""
        real = Path(os.path.realpath(path))
        deepest: tuple[str, Path] | None = None
        for kind, where in self.rules:
            folder = Path(os.path.realpath(where))
            if real.is_relative_to(folder) and (deepest is None or
                                                len(folder.parts) >= len(deepest[1].parts)):
                deepest = (kind, folder)
        if deepest is not None:
            return f"{real} is under {deepest[1]}, which the sandbox hides" \
                if deepest[0] == HIDE else ""
        return f"{real} is under /tmp, which the sandbox replaces by a private one" \
            if real.is_relative_to("/tmp") else ""

    def writable(self) -> list[Path]:
        return [path for kind, path in self.laid_out() if kind == WRITE]


def wrap(bwrap: str, fence: Fence, argv: Sequence[str], tmp: int | None = None) -> list[str]:
    """argv run inside fence; tmp: the bytes each folder of its own (the private /tmp, TMPDIR,
    a hidden folder's empty stand-in) may hold (None: as much as memory; `Support.sized`
    says whether this bubblewrap can cap them)."""
    # a tmpfs is memory: uncapped, the kernel lets one hold up to half of the machine's
    sized = ["--size", str(tmp)] if tmp is not None else []
    out = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *sized,
           "--tmpfs", "/tmp"]
    for kind, path in fence.laid_out():
        where = str(path)
        if kind == WRITE:
            out += ["--bind", where, where]
        elif kind == READ:
            out += ["--ro-bind", where, where]
        elif path.is_dir() and not path.is_symlink():
            out += [*sized, "--tmpfs", where]
        else:
            out += ["--ro-bind", "/dev/null", where]
    for where_, what in fence.overlays:
        if os.path.lexists(where_):
            out += ["--ro-bind", str(what), str(Path(os.path.realpath(where_)))]
    # its own processes only (no other peer's environment); ended with its pane;
    # as root, no capability to remount what it was given read-only
    out += ["--unshare-pid", "--unshare-ipc", "--die-with-parent"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        out += ["--cap-drop", "ALL"]
    return [*out, "--chdir", str(fence.workdir), "--", *argv]


def credentials(home: Path) -> list[Path]:
    """The credential folders and files a peer never sees (whether they exist or not)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR") or (f"/run/user/{os.getuid()}"
                                                     if hasattr(os, "getuid") else "")
    moved = [Path(os.environ[name]) for name in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")
             if os.path.isabs(os.environ.get(name) or "")]
    return [*(home / name for name in (*HIDDEN_IN_HOME, *CLI_HOMES)), *moved,
            *(Path(p) for p in HIDDEN_ELSEWHERE), *([Path(runtime)] if runtime else [])]


@dataclass(frozen=True)
class Support:
    """Whether peers can be sandboxed here: bubblewrap's path, or why not and what to do."""

    bwrap: str
    why: str
    fix: str = ""
    #: it takes `--size` (bubblewrap 0.7 and later): the fence's own folders can be capped
    sized: bool = False

    @property
    def available(self) -> bool:
        return bool(self.bwrap)


def in_force(mode: str) -> Support | None:
    """bubblewrap when peers run fenced in under config mode `mode` (auto or on, where it
    works); None when they run as the person does. The one place this is decided."""
    if mode == "off":
        return None
    found = support()
    return found if found.available else None


#: the settings that decide whether unprivileged user namespaces (which bubblewrap needs) work
USERNS_SYSCTLS = ("kernel.apparmor_restrict_unprivileged_userns",
                  "kernel.unprivileged_userns_clone", "user.max_user_namespaces")


def _sysctl(name: str) -> str:
    try:
        return Path("/proc/sys", *name.split(".")).read_text().strip()
    except OSError:
        return ""


def support() -> Support:
    """Whether bubblewrap makes the peers' layout here: probed once per bubblewrap binary and
    user-namespace setting. The warm process (handoff.cli.warm) probes before it forks, so a
    `start` and an orchestrator skip the probe's bwrap run unless what decides it changed."""
    if sys.platform != "linux":
        return _probe("", ())
    bwrap = shutil.which("bwrap") or ""
    try:
        found = os.stat(bwrap) if bwrap else None
    except OSError:
        found = None
    identity = (found.st_ino, found.st_size, found.st_mtime_ns, found.st_mode) if found else ()
    return _probe(bwrap, (*identity, *map(_sysctl, USERNS_SYSCTLS)))


@functools.cache
def _probe(bwrap: str, _identity: tuple[object, ...]) -> Support:
    """bubblewrap at bwrap running a command in the layout peers get (identity: what the
    answer depends on beyond the path, the cache's key)."""
    if sys.platform != "linux":
        return Support("", f"the sandbox is bubblewrap, which needs Linux; this is "
                       f"{platform.system() or sys.platform}: peers run unsandboxed",
                       "run handoff on Linux for sandboxed peers, or set sandbox: off to say "
                       "you know")
    if not bwrap:
        return Support("", "bubblewrap (bwrap) is not installed",
                       "install it: apt install bubblewrap (Debian, Ubuntu), dnf install "
                       "bubblewrap (Fedora), pacman -S bubblewrap (Arch)")
    try:
        done = _run(wrap(bwrap, Fence(Path("/")), ["true"], tmp=1 << 20))
        sized = done.returncode == 0
        if not sized and "--size" in done.stderr:  # before 0.7: the same without the caps
            done = _run(wrap(bwrap, Fence(Path("/")), ["true"]))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Support("", f"bubblewrap could not be run: {exc}", "run `bwrap --version`")
    if done.returncode == 0:
        return Support(bwrap, f"bubblewrap ({bwrap})", sized=sized)
    said = " ".join((done.stderr or done.stdout).split())[:200]
    return Support("", f"bubblewrap cannot make a sandbox here: {said}", userns_fix())


def _run(probe: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(probe, capture_output=True, text=True, timeout=20,
                          stdin=subprocess.DEVNULL, errors="replace")


def userns_fix() -> str:
    """What keeps unprivileged user namespaces (which bubblewrap needs) off on this system."""
    if _sysctl("kernel.apparmor_restrict_unprivileged_userns") == "1":
        return ("AppArmor restricts unprivileged user namespaces (Ubuntu 24.04 and later): "
                "give bwrap a profile that allows them (an /etc/apparmor.d/bwrap file with "
                "'abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap "
                "flags=(unconfined) { userns, }' then `sudo systemctl reload apparmor`), or "
                "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`")
    if _sysctl("kernel.unprivileged_userns_clone") == "0":
        return "`sudo sysctl kernel.unprivileged_userns_clone=1` (user namespaces are off)"
    if _sysctl("user.max_user_namespaces") == "0":
        return "`sudo sysctl user.max_user_namespaces=15000` (user namespaces are off)"
    return ("bubblewrap needs unprivileged user namespaces (or to be setuid root): inside a "
            "container, run it with them allowed; else set sandbox: off")

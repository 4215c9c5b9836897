"""Who may file a report: the peer processes handoff started, as the kernel names them.

For each role and round, handoff records the process it started (or briefed, by a paste) to
work on it: its pane's program, named by pid, start and boot, which together name one process
(`grant`). `handoff submit` hands a report over a Unix socket whose other end the kernel names
(SO_PEERCRED), and the orchestrator checks that process's lineage against this record
(handoff.loop.filer): the report counts only when it came from a command of that very peer's
own CLI, never from a program that command ran.

No secret is handed to a peer: none can be inherited by the code it runs (the tests of the
commit under review), read from its environment or copied out of a file. The ticket's own key
(`key`, in this folder, which no peer sees: the sandbox hides it) signs the receipt of every
report handoff filed, so a report written into the ticket folder by hand never passes for one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from handoff.record.store import private_dir


class Grants:
    """The grants and the receipt key of one ticket directory."""

    def __init__(self, ticket_dir: Path) -> None:
        self.folder = ticket_dir / "grants"

    def grant(self, role: str, round_: int, identity: str) -> None:
        """The process named identity may file role's report for round_."""
        if identity and identity not in self.granted(role, round_):
            self._append(self.folder / f"{role}-{round_}", identity)

    def granted(self, role: str, round_: int) -> set[str]:
        try:
            return set((self.folder / f"{role}-{round_}").read_text(encoding="utf-8").split())
        except FileNotFoundError:
            return set()

    def sign(self, text: str) -> str:
        """The ticket's signature of text (a receipt's fields): only handoff holds the key."""
        return hmac.new(self.key(), text.encode(), hashlib.sha256).hexdigest()

    def signed(self, text: str, signature: str) -> bool:
        return bool(signature) and hmac.compare_digest(self.sign(text), signature)

    def key(self) -> bytes:
        path = self.folder / "key"
        try:
            data = path.read_bytes()
            if len(data) == 32:
                return data
        except FileNotFoundError:
            pass
        private_dir(self.folder)
        fresh = secrets.token_bytes(32)
        try:  # O_EXCL: two processes making it at once agree on the first one's
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_bytes()
        try:
            os.write(fd, fresh)
            os.fsync(fd)
        finally:
            os.close(fd)
        return fresh

    def _append(self, path: Path, line: str) -> None:
        private_dir(self.folder)
        # O_APPEND: a single short write lands whole, even with two writers
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{line}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)

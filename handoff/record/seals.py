"""Who may file a report: a seal handed to each peer process when handoff starts it.

Every launch of a peer gets a fresh random seal in its environment (`HANDOFF_SEAL`), and
nowhere else. For each round the process is given (at launch, or by a pasted brief), handoff
records the fingerprint of the round's stamp, `HMAC(seal, "role:round")`, in
`<ticket>/seals/<role>-<round>`. `handoff submit` derives the stamp from its own environment:
it proves the report comes from the process handoff started for that role and briefed for that
round, so a report written by hand, filed with another role's flags, or for another round, does
not count. The stamp goes into the report's receipt; the orchestrator checks it once and then
marks it spent, so a stamp read from an old receipt cannot file anything again.

Peers run as the same user as handoff. This stops a peer that writes files it should not or
runs `handoff submit` outside its role; it cannot stop one that deliberately reads another
process's environment or rewrites handoff's own records (docs/reliability.md, threat model).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

ENV = "HANDOFF_SEAL"


def new() -> str:
    return secrets.token_hex(16)


def stamp(seal: str, role: str, round_: int) -> str:
    """What the process holding seal shows for role's report of round_."""
    return hmac.new(seal.encode(), f"{role}:{round_}".encode(), hashlib.sha256).hexdigest()


def fingerprint(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


class Seals:
    """The grants and spent stamps of one ticket directory."""

    def __init__(self, ticket_dir: Path) -> None:
        self.folder = ticket_dir / "seals"

    def grant(self, role: str, round_: int, seal: str) -> None:
        """The process holding seal may file role's report for round_."""
        self._append(self.folder / f"{role}-{round_}", fingerprint(stamp(seal, role, round_)))

    def granted(self, role: str, round_: int) -> set[str]:
        return self._lines(self.folder / f"{role}-{round_}")

    def spend(self, value: str) -> None:
        """A stamp that filed a report once never files another."""
        self._append(self.folder / "spent", fingerprint(value))

    def check(self, role: str, round_: int, value: str) -> str:
        """'' when value proves role's report for round_; else why not."""
        if not value:
            return "it carries no stamp from a peer's session"
        mark = fingerprint(value)
        if mark in self._lines(self.folder / "spent"):
            return "its stamp was used before"
        if mark not in self.granted(role, round_):
            return f"its stamp is not the one handoff gave the {role} for round {round_}"
        return ""

    def _append(self, path: Path, line: str) -> None:
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        # O_APPEND: a single short write lands whole, even with two writers
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, f"{line}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    @staticmethod
    def _lines(path: Path) -> set[str]:
        try:
            return set(path.read_text(encoding="utf-8").split())
        except FileNotFoundError:
            return set()


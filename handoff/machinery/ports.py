"""TCP ports for the worktrees of this machine's tickets: a dev server or a test database of one
worktree never fights another's over a port.

A worktree's ports come from a book in the handoff home (`ports.json`), kept under a lock
(`ports.lock`, a flock the kernel drops with its holder however it dies), so tickets started
together never get the same port. A port is booked only when nothing listens on it now; it is
the worktree's until its ticket is closed (`release`), and a booking whose ticket is gone is
taken back by the next `take` (nothing leaks when a ticket dies without closing).
"""

from __future__ import annotations

import contextlib
import errno
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import ExternalFailure
from handoff.record.lock import briefly
from handoff.record.store import atomic_write

BOOK = "ports.json"
LOCK = "ports.lock"
#: how long a take or a release waits for another one to finish
LOCK_WAIT = 30.0


def free(port: int) -> bool:
    """Nothing listens on port now (on any address of this machine, IPv4 or IPv6)."""
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                if family == socket.AF_INET6:
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                probe.bind((address, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return False
                if family == socket.AF_INET6:
                    continue  # no IPv6 here: the IPv4 answer stands
                raise
    return True


@dataclass(frozen=True)
class PortBook:
    """The ports booked for this handoff home's worktrees: port → its owner (`ticket dir#name`)."""

    home: Path

    @contextlib.contextmanager
    def _held(self) -> Iterator[dict[int, str]]:
        """The book, under the lock, written back when the block ends without an error."""
        with briefly(self.home / LOCK, LOCK_WAIT, "the port book",
                     "retry; another handoff is booking ports"):
            book = self._read()
            yield book
            atomic_write(self.home / BOOK, json.dumps(
                {str(port): owner for port, owner in sorted(book.items())}, indent=1) + "\n")

    def _read(self) -> dict[int, str]:
        try:
            data = json.loads((self.home / BOOK).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            return {}  # a damaged book: every port is checked free again before it is given
        if not isinstance(data, dict):
            return {}
        return {int(port): str(owner) for port, owner in data.items() if str(port).isdigit()}

    def take(self, owner: str, count: int, low: int, high: int,
             alive: Callable[[str], bool]) -> list[int]:
        """count ports for owner, from low to high: the ones it has, more when it has fewer.
        Bookings whose owner is no longer alive are taken back first."""
        with self._held() as book:
            for port, held_by in list(book.items()):
                if held_by != owner and not alive(held_by):
                    del book[port]
            mine = sorted(port for port, held_by in book.items() if held_by == owner)
            for port in range(low, high + 1):
                if len(mine) >= count:
                    break
                if port not in book and free(port):
                    book[port] = owner
                    mine.append(port)
            if len(mine) < count:
                raise ExternalFailure(f"only {len(mine)} of the {count} ports {owner} needs are "
                                      f"free in {low}-{high}",
                                      "widen port_range in your config, or close tickets you "
                                      "are done with")
            return mine[:count]

    def release(self, prefix: str) -> list[int]:
        """Give back every port of the owners that start with prefix (a ticket's dir#)."""
        with self._held() as book:
            gone = sorted(port for port, owner in book.items() if owner.startswith(prefix))
            for port in gone:
                del book[port]
        return gone

    def held(self, prefix: str) -> dict[str, list[int]]:
        """The ports of the owners that start with prefix, by owner (read without the lock)."""
        found: dict[str, list[int]] = {}
        for port, owner in sorted(self._read().items()):
            if owner.startswith(prefix):
                found.setdefault(owner, []).append(port)
        return found

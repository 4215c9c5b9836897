"""TCP ports for the worktrees of this machine's tickets: a dev server or a test database of one
worktree never fights another's over a port.

A worktree's ports come from a book in the handoff home (`ports.json`), kept under a lock
(`ports.lock`, a flock the kernel drops with its holder however it dies), so tickets started
together never get the same port. A port is booked only when nothing listens on it now; it is
the worktree's until its ticket is closed (`release`), and a booking whose ticket is gone is
taken back by the next `take` (nothing leaks when a ticket dies without closing).

Other handoff homes of the machine (a second HANDOFF_HOME, another user, a host's user beside
another) have books of their own, so each booking is also claimed machine-wide: a file per
port in CLAIMS, made with O_EXCL (one claimant wins), naming the home and owner. A claim is
given back with its booking; one of ours whose booking is gone is taken back; another user's
is respected (only its owner can judge it, and remove it: the folder is sticky, as /tmp is).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from handoff.errors import ExternalFailure
from handoff.record.lock import briefly
from handoff.record.store import atomic_write

#: where every handoff home of this machine claims its ports (world-writable and sticky)
CLAIMS = Path("/tmp/handoff-ports")
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
    """The ports booked for this handoff home's worktrees: port → its owner (`ticket dir#name`),
    each claimed in claims for the whole machine (None: this home's book alone)."""

    home: Path
    claims: Path | None = CLAIMS

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
                    self._unclaim(port)
            mine = sorted(port for port, held_by in book.items() if held_by == owner)
            for port in range(low, high + 1):
                if len(mine) >= count:
                    break
                if port not in book and free(port) and self._claim(port, owner, book, alive):
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
                self._unclaim(port)
        return gone

    # ---- the machine's claims ---------------------------------------------------------------
    def _folder(self) -> Path | None:
        """The claims folder, made (sticky, for every user) when it is not there; None when it
        cannot be used: then this home's book alone decides, as before claims."""
        if self.claims is None:
            return None
        with contextlib.suppress(FileExistsError, OSError):
            os.mkdir(self.claims, 0o700)
            os.chmod(self.claims, 0o1777)
        try:
            found = os.lstat(self.claims)
        except OSError:
            return None
        # a link or a plain folder another user made could lead elsewhere, or be theirs alone
        if not stat.S_ISDIR(found.st_mode) or not found.st_mode & stat.S_ISVTX:
            return None
        return self.claims

    def _claim(self, port: int, owner: str, book: dict[int, str],
               alive: Callable[[str], bool]) -> bool:
        """Claim port for owner, machine-wide; False when another home holds it."""
        folder = self._folder()
        if folder is None:
            return True
        path = folder / str(port)
        for _ in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            except FileExistsError:
                if not self._stale(path, port, book, alive):
                    return False
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                continue
            except OSError:
                return True  # claims cannot be made here: the home's book alone decides
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(f"{self.home}\n{owner}\n")
            return True
        return False

    def _stale(self, path: Path, port: int, book: dict[int, str],
               alive: Callable[[str], bool]) -> bool:
        """A claim of our own user's whose booking is gone (its home's book no longer has the
        port, or its home is gone: a claimant that died before it booked, a home deleted) or
        whose booking's ticket is (closed or removed, in a home no handoff books in now)."""
        try:
            if os.lstat(path).st_uid != os.getuid():
                return False  # another user's: theirs to judge
            home = Path(path.read_text(encoding="utf-8").splitlines()[0])
        except (OSError, IndexError, ValueError):
            return False
        if home == self.home:
            return port not in book
        theirs = PortBook(home, None)._read()
        return port not in theirs or not alive(theirs[port])

    def _unclaim(self, port: int) -> None:
        folder = self._folder()
        if folder is None:
            return
        path = folder / str(port)
        with contextlib.suppress(OSError, IndexError):
            if os.lstat(path).st_uid == os.getuid() and \
                    path.read_text(encoding="utf-8").splitlines()[0] == str(self.home):
                os.unlink(path)

    def held(self, prefix: str) -> dict[str, list[int]]:
        """The ports of the owners that start with prefix, by owner (read without the lock)."""
        found: dict[str, list[int]] = {}
        for port, owner in sorted(self._read().items()):
            if owner.startswith(prefix):
                found.setdefault(owner, []).append(port)
        return found

"""A Unix socket's path, short enough to bind or connect to.

Standard library only: a peer's `handoff submit` and every relayed command reach a socket
through it before anything else is loaded.
"""

from __future__ import annotations

import os
from types import TracebackType

#: sun_path holds 108 bytes on Linux, 104 on macOS, with the closing NUL
_PATH_ROOM = 100


class Address:
    """The socket's path, short enough to bind or connect to: a long ticket directory is
    reached through a descriptor of its folder (/proc/self/fd/N), never by changing the
    process's working directory."""

    def __init__(self, folder: str, name: str) -> None:
        self.path = os.path.join(folder, name)
        self._fd = -1
        if len(os.fsencode(self.path)) > _PATH_ROOM and os.path.isdir("/proc/self/fd"):
            self._fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self.path = f"/proc/self/fd/{self._fd}/{name}"

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Address:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

"""The life cycle every stand-in model server shares: an HTTP server on 127.0.0.1 (a free
port) in a daemon thread, started and stopped around a test."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Self


class StandInError(AssertionError):
    pass


class LocalServer:
    """Subclasses give `handler()` (the request handler class bound to them) and `name`."""

    name = "standin"

    def __init__(self) -> None:
        #: set when the server stops: a handler waiting out a deliberate delay ends at once
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def handler(self) -> type[BaseHTTPRequestHandler]:
        raise NotImplementedError

    def start(self) -> Self:
        server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        # daemon threads: a handler sleeping in a delay or blocked on a vanished client never
        # holds up stop()
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise StandInError("the stand-in is not running")
        return int(self._server.server_address[1])

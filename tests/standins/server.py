"""What every stand-in model server shares: an HTTP server on 127.0.0.1 (a free port) in a
daemon thread, started and stopped around a test, and the record of what it was asked and
could not answer."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Generic, Self, TypeVar

#: what one stand-in records of each request it answered
Exchange = TypeVar("Exchange")


class StandInError(AssertionError):
    pass


class LocalServer(Generic[Exchange]):
    """Subclasses give `handler()` (the request handler class bound to them), `name` and
    `label` (how its errors are introduced)."""

    name = "standin"
    label = "the stand-in"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: list[Exchange] = []
        self._errors: list[str] = []
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

    # -- what tests read -------------------------------------------------------------------

    def log(self) -> list[Exchange]:
        with self._lock:
            return list(self._log)

    @property
    def errors(self) -> list[str]:
        """Requests the stand-in could not answer as asked (unknown tool, brain failure…)."""
        with self._lock:
            return list(self._errors)

    def check(self) -> None:
        if self.errors:
            raise StandInError(f"{self.label} reported:\n" + "\n".join(self.errors))

    def _record(self, exchange: Exchange, error: str | None = None) -> None:
        with self._lock:
            self._log.append(exchange)
            if error is not None:
                self._errors.append(error)

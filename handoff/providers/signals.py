"""Signal files: what a CLI's hooks tell the orchestrator (a prompt arrived, a turn ended).

Each hook runs the shipped `peer-signal` script, which drops one JSON file per event into the
peer's signal folder (`<ticket>/signals/<role>/`). The files are hints that make the
orchestrator look sooner and name their evidence; completion is still only an accepted report.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from handoff.inputs import KIB
from handoff.record import peerfiles

#: one hook's input: a few hundred bytes of JSON, a Notification's message, a tool's name
SIGNAL_LIMIT = 64 * KIB
#: signal files read per call (a hook writes one per turn's start and end) and folder entries
#: looked at to find them
MAX_SIGNALS, MAX_LISTED = 256, 4096


def script() -> Path:
    return Path(str(resources.files("handoff.hooks").joinpath("peer-signal")))


def signal_command(folder: Path, event: str) -> str:
    """The hook's command line (CLIs run hook commands through a shell)."""
    return shlex.join(signal_argv(folder, event))


def signal_argv(folder: Path, event: str) -> list[str]:
    """The same as an argv, for CLIs that run a notify program without a shell."""
    return ["sh", str(script()), str(folder), event]


@dataclass(frozen=True)
class Signal:
    event: str
    path: Path
    mtime_ns: int
    #: the hook's input as the CLI gave it (a peer could write anything there)
    data: dict[str, object]

    def hook(self, usual: str) -> str:
        """The CLI's own name of the hook that wrote it (Gemini's BeforeAgent, …), where the
        hook's input says it; else usual (Claude Code's name for that signal)."""
        name = self.data.get("hook_event_name")
        return name if isinstance(name, str) and 0 < len(name) <= 40 and name.isprintable() \
            else usual

    def detail(self) -> str:
        """A short description of what the hook carried, for the event log."""
        said = [str(self.data[key])[:100] for key in ("notification_type", "type", "tool_name",
                                                       "message")
                if isinstance(self.data.get(key), str) and self.data[key]]
        return f"{self.event} ({': '.join(said)})" if said else self.event


def read_signals(folder: Path, since_ns: int) -> list[Signal]:
    """Signals written at or after since_ns, oldest first (half-written ones are skipped).

    The folder is the peer's to write: only its regular files are read (a FIFO would hold the
    orchestrator in open() for ever, a link would carry another file's words into the event
    log), each up to SIGNAL_LIMIT (a larger one is a signal without data), at most MAX_SIGNALS
    per call, the oldest (what is left is read at the next call, from the last one's time)."""
    try:
        # the folder itself is bound into the peer's fence, so it cannot swap it for a link:
        # it is the root below which nothing is followed
        entries = peerfiles.files(folder, folder, MAX_LISTED)
    except peerfiles.Refused:
        return []
    fresh = sorted((entry for entry in entries
                    if not entry.name.startswith(".") and entry.name.endswith(".json")
                    and entry.stat.st_mtime_ns >= since_ns),
                   key=lambda entry: (entry.stat.st_mtime_ns, entry.name))
    found = []
    for entry in fresh[:MAX_SIGNALS]:
        try:
            text = peerfiles.read_bytes(folder, entry.path, SIGNAL_LIMIT).decode("utf-8",
                                                                                   "replace")
            data = json.loads(text or "{}")
        except peerfiles.Gone:
            continue
        except (peerfiles.Refused, ValueError, RecursionError):
            data = {}
        found.append(Signal(entry.name.split(".", 1)[0], entry.path, entry.stat.st_mtime_ns,
                            data if isinstance(data, dict) else {}))
    return found

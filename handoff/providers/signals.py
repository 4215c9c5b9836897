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
from typing import Any

#: a prompt arrived, a turn ended, the CLI says something (Claude Code's Notification), the CLI
#: asks a permission (Codex's PermissionRequest)
PROMPT, STOP, NOTIFICATION, PERMISSION = "prompt", "stop", "notification", "permission"


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
    data: dict[str, Any]

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
    """Signals written at or after since_ns, oldest first (half-written ones are skipped)."""
    found = []
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    for path in entries:
        if path.name.startswith(".") or not path.name.endswith(".json"):
            continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if stat.st_mtime_ns < since_ns:
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8", errors="replace") or "{}")
        except (OSError, ValueError):
            data = {}
        found.append(Signal(path.name.split(".", 1)[0], path, stat.st_mtime_ns,
                            data if isinstance(data, dict) else {}))
    return sorted(found, key=lambda s: (s.mtime_ns, s.path.name))

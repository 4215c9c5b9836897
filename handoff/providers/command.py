"""Any command as a peer: an argv template from config, and optional screen markers.

    roles:
      implementer:
        provider: command
        command: [my-agent, --task, "{message}", --cwd, "{worktree}"]
        markers: {composer: ">", busy: "thinking", turn_ended: "^done"}

Placeholders: {message} (the one-line "Read and follow <brief>"), {brief}, {role},
{worktree}, {ticket_dir}. Without a composer marker handoff cannot tell a draft from output:
later messages are still pasted, and "taken" means the message shows on the screen.
"""

from __future__ import annotations

import shutil

from handoff.errors import UsageError
from handoff.providers.base import Launch, Provider

PLACEHOLDERS = ("message", "brief", "role", "worktree", "ticket_dir")
MARKERS = ("composer", "busy", "turn_ended")


def fill(template: tuple[str, ...], launch: Launch) -> list[str]:
    values = {"message": launch.message, "brief": str(launch.brief), "role": launch.role,
              "worktree": str(launch.worktree), "ticket_dir": str(launch.ticket_dir)}
    out = []
    for part in template:
        try:
            out.append(part.format(**values))
        except (KeyError, IndexError, ValueError) as exc:
            raise UsageError(f"roles.{launch.role}.command: cannot fill {part!r} ({exc})",
                             "placeholders are " + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
                             + "; write a literal brace as {{ or }}") from None
    return out


class Command(Provider):
    name = "command"
    modes = ("bypass",)

    def executable(self) -> str | None:
        if not self.spec.command:
            return None
        return shutil.which(self.spec.binary or self.spec.command[0])

    def missing(self) -> str | None:
        if not self.spec.command:
            return "the command provider needs roles.<role>.command: [argv, …, \"{message}\"]"
        if self.executable() is None:
            return f"{self.spec.command[0]} is not installed or not on PATH"
        return None

    def version(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        return fill(self.spec.command, launch)

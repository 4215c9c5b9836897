"""Tell a ticket's person when it needs them or has ended: on its tmux session, on the desktop
and through their own command.

The orchestrator calls `phase_changed` on every phase change. The session's status line always
shows the phase and round; a phase a person must act on or hear about (`TOLD`) is also

* shown on every client attached to the ticket's session (tmux `display-message`, through
  `Tmux.call`: the same bounded runner as every other tmux call);
* sent to the desktop by `notify-send` (Linux) or `osascript` (macOS), when one is on PATH;
* given as one JSON object on the stdin of the `notify` command from the config.

Nothing here may hold up or stop the ticket: every program runs through `proc.run` with a short
bound, and what fails becomes a `notify-failed` event.

A plan waiting for approval is told by `handoff start` (`approval_wanted`) when nobody was at a
terminal to answer its prompt (a script, an agent, a scheduler started it): on the desktop and
through the command only, since no session exists before the plan is approved.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from handoff import next_steps
from handoff.errors import HandoffError
from handoff.machinery import proc
from handoff.machinery.tmux import Tmux
from handoff.phases import Phase
from handoff.record.events import now
from handoff.record.ticket import State

#: the phases a person is told about (a notice's `kind`): one needs them, two are the end
TOLD = (Phase.AWAITING_APPROVAL, Phase.NEEDS_HUMAN, Phase.ESCALATED, Phase.PASSED)
#: the longest the user's command may run: it can never hang the orchestrator
COMMAND_TIMEOUT = 10.0
DESKTOP_TIMEOUT = 5.0
#: milliseconds a tmux message stays on an attached client's status line (tmux's own 750 ms is
#: gone before anyone looks; 0 would stay until a key press and might take that key)
DISPLAY_MS = 10_000
#: desktop notifiers in the order they are looked for on PATH
DESKTOP = ("notify-send", "osascript")
# osascript: title and text as arguments, so nothing in them is ever read as AppleScript
OSASCRIPT = ("-e", "on run argv", "-e",
             "display notification (item 2 of argv) with title (item 1 of argv)", "-e", "end run")

Record = Callable[..., object]


@dataclass(frozen=True)
class Notice:
    """One notification: what the `notify` command reads on its stdin, as JSON."""

    ticket: str
    repo: str
    phase: str
    round: int
    kind: str
    message: str
    time: str

    @property
    def title(self) -> str:
        return f"handoff {self.ticket}: {self.kind}"

    @property
    def text(self) -> str:
        return f"round {self.round}: {self.message}"


def notice_for(state: State) -> Notice | None:
    """The notice for the state's phase: its reason, then what the person does next (as
    `status` says it); None when its phase is not told."""
    if state.phase not in TOLD:
        return None
    step = next_steps.step(state.phase, running=True)  # the same for a told phase either way
    said = state.reason or (f"the reviewer passed it; its branch {state.branch} is ready"
                            if state.phase == Phase.PASSED else step.why.format(
                                ticket=state.ticket, folder="its folder"))
    message = f"{said} — next: {step.next(state.ticket)}" if step.commands else said
    return Notice(ticket=state.ticket, repo=state.repo, phase=state.phase, round=state.round,
                  kind=state.phase, message=message, time=now())


def status_line(state: State) -> str:
    """The ticket session's status-left: its name (which holds the ticket id), phase and round.
    A format: `#` is tmux's, so none may come from elsewhere (phases never hold one)."""
    return f"[#S] {state.phase} r{state.round} "


def phase_changed(state: State, tmux: Tmux, command: Sequence[str], cwd: Path,
                  record: Record) -> None:
    """Show the new phase on the session's status line; tell the person when it is `TOLD`.
    record(kind, **fields) writes an event (the orchestrator's `event`)."""
    reached = show_phase(state, tmux)
    notice = notice_for(state)
    if notice is None:
        return
    tell(notice, tmux if reached else None, state.session, command, cwd, record)


def approval_wanted(state: State, command: Sequence[str], cwd: Path, record: Record) -> None:
    """Tell the person the ticket's plan waits for their approval (no session to show it on)."""
    notice = notice_for(state)
    if notice is not None:
        tell(notice, None, state.session, command, cwd, record)


def tell(notice: Notice, tmux: Tmux | None, session: str, command: Sequence[str], cwd: Path,
         record: Record, timeout: float = COMMAND_TIMEOUT) -> None:
    """Deliver notice everywhere it can go: a `notified` event says where it went, and each
    failure is a `notify-failed` event (their field `notice` is the notice's kind). tmux None:
    the server did not answer, so it is not asked again (each call could wait its timeout)."""
    via: list[str] = []
    if tmux is not None:
        try:
            if _display(tmux, session, f"{notice.title} ({notice.text})"):
                via.append("tmux")
        except HandoffError as exc:
            record("notify-failed", notice=notice.kind, channel="tmux", reason=exc.message)
    desktop = _desktop(notice)
    if desktop is None:
        desktop_fields: dict[str, Any] = {"desktop": "not available"}
    else:
        desktop_fields = {}
        failure = _run(desktop, None, DESKTOP_TIMEOUT, cwd)
        if failure:
            record("notify-failed", notice=notice.kind, channel="desktop", reason=failure)
        else:
            via.append(Path(desktop[0]).name)
    if command:
        failure = _run(list(command), json.dumps(asdict(notice)) + "\n", timeout, cwd)
        if failure:
            record("notify-failed", notice=notice.kind, channel="command", reason=failure)
        else:
            via.append("command")
    record("notified", notice=notice.kind, via=via, **desktop_fields)


def show_phase(state: State, tmux: Tmux) -> bool:
    """The session's status line shows the state's phase and round (set on each change, and on
    a session made anew); False when tmux does not answer (a gone session or server is no
    failure: there is nobody to show it to)."""
    try:
        tmux.call("set-option", "-t", f"={state.session}:", "status-left", status_line(state))
    except HandoffError:  # no answer in time, or no tmux installed: nothing to show it on
        return False
    return True


def _display(tmux: Tmux, session: str, text: str) -> bool:
    """The message on every client attached to the session; False when none is."""
    listed = tmux.call("list-clients", "-t", f"={session}:", "-F", "#{client_name}")
    clients = [name for name in listed.stdout if name] if listed.returncode == 0 else []
    literal = text.replace("#", "##")  # the message is a format: a reason may hold '#'
    for client in clients:
        shown = tmux.call("display-message", "-c", client, "-d", str(DISPLAY_MS), literal)
        if shown.returncode != 0 and "unknown flag" in shown.said:  # tmux before 3.2: no -d
            shown = tmux.call("display-message", "-c", client, literal)
        if shown.returncode != 0 and "can't find client" not in shown.said:  # not detached
            raise tmux.failure(("display-message",), shown.said)
    return bool(clients)


def _desktop(notice: Notice) -> list[str] | None:
    """The argv that puts notice on the desktop; None when no notifier is on PATH."""
    for name in DESKTOP:
        found = shutil.which(name)
        if found is None:
            continue
        if name == "notify-send":
            return [found, "--app-name=handoff", notice.title, notice.text]
        return [found, *OSASCRIPT, notice.title, notice.text]
    return None


def _run(argv: list[str], input_text: str | None, timeout: float, cwd: Path) -> str:
    """Run a notifier, bounded; what went wrong, or '' when it succeeded."""
    try:
        done = proc.run(argv, cwd=cwd if cwd.is_dir() else None, timeout=timeout, check=False,
                        input_text=input_text)
    except HandoffError as exc:  # its timeout (it was ended with all it started), or missing
        return exc.message
    if done.returncode == 0:
        return ""
    said = (done.stderr or done.stdout).strip().splitlines()
    return f"{argv[0]} exited with {done.returncode}" + (f": {said[-1][:300]}" if said else "")

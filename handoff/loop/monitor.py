"""Judging one launched peer from what it shows: its hooks' signals first, its screen second.

`PeerMonitor.observe` is pure: given the time, a reading of the screen and the signals since
the last look, it returns what the orchestrator should do — note a change of state, answer a
start-up screen, nudge a peer whose turn ended without a report, or ask a person. Each
judgement carries the evidence it was made on (the hook, or the screen lines matched), so
`handoff log` can say why handoff thought what it thought.

Completion is never judged here: only an accepted report completes a round.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from handoff.providers.screen import BLOCKED, BUSY, DIALOG, READY, STARTING, Reading
from handoff.providers.signals import Signal
from handoff.signs import NOTIFICATION, PERMISSION, PROMPT, STOP

WAITING_FOR_PERMISSION = "waiting for permission"
PERMISSION_FIX = ("run the role in bypass mode (roles.<role>.permission_mode: bypass), or "
                  "attach and answer the prompt by hand")
#: how often handoff answers the same start-up screen before it asks a person instead
ANSWERS_PER_DIALOG = 2
#: seconds between looks at a peer (its pane listed, its screen read) while it starts: its
#: start-up screens and dialogs show only there
STARTING_LOOK = 0.5
#: ... once it works and has no hooks: a turn that ended without a report, or a dialog, shows
#: only on its screen
WORKING_LOOK = 5.0
#: ... once it works and its hooks say when a turn starts and ends (a Notification hook says
#: when it waits for permission): the screen is left only to tell a stall from slow work. Not
#: in a turn's first HOOKED_LOOK seconds, though: an unreachable API or a spent quota shows at
#: its first request, on screen alone, and was read 30 s late (a quota's fallback took over
#: half a minute after the prompt); it is looked at every WORKING_LOOK then
HOOKED_LOOK = 30.0
#: seconds a turn a prompt hook started may show a bare input line before that is taken for
#: its end without the Stop hook: Gemini CLI and opencode keep their input line on screen while
#: they work, and any CLI's screen lags its hooks (a lost Stop hook still ends the turn)
HOOKED_READY = 30.0
_NOISE = re.compile(r"[\d·✢*✶✻✽•◦⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]+")


@dataclass(frozen=True)
class Timing:
    start: float = 120.0
    stall: float = 1800.0
    grace: float = 5.0
    nudges: int = 1
    #: seconds a blocker (an unreachable API, a quota message) may last before a person is
    #: asked; None: each blocker's own patience, measured against its CLI's retries
    patience: float | None = None
    #: seconds a live peer may go without a hook signal or a screen its rules read before
    #: handoff says it cannot tell what the peer does (a CLI release that changed its screen)
    unrecognised: float = 60.0
    #: key → the configuration file a fix names for it (the one that sets it now)
    files: tuple[tuple[str, str], ...] = ()

    def file(self, key: str) -> str:
        return dict(self.files).get(key, ".handoff.yaml")


class Action(StrEnum):
    """What the loop does about a peer."""

    #: say a change of its state
    NOTE = "note"
    #: send keys (a dialog it may answer)
    ANSWER = "answer"
    #: paste a reminder (its turn ended with no report)
    NUDGE = "nudge"
    #: a person must step in
    ESCALATE = "escalate"
    #: say, with the screen kept, that nothing on it or from hooks was read
    UNRECOGNISED = "unrecognised"


@dataclass(frozen=True)
class Decision:
    action: Action
    state: str
    evidence: str
    keys: tuple[str, ...] = ()
    fix: str = ""
    #: the dialog an answer is for
    dialog: str = ""


@dataclass
class PeerMonitor:
    launched: float
    timing: Timing
    #: dialog names handoff may answer for this role
    answer: frozenset[str] = frozenset()
    arrived: bool = False
    ended_at: float | None = None
    ended_by: str = ""
    #: the end came from the CLI's Stop hook: only its next prompt hook starts a new turn (a
    #: screen that still shows the spinner a moment later is only lagging)
    ended_by_hook: bool = False
    #: the turn was started by the CLI's prompt hook: its Stop hook, or a screen that says the
    #: turn ended, ends it; a bare input line only once it lasted HOOKED_READY
    started_by_hook: bool = False
    ready_since: float | None = None
    #: when the turn's prompt hook came
    prompted_at: float | None = None
    nudged: int = 0
    last_progress: float = 0.0
    noted: str = ""
    answered: dict[str, int] = field(default_factory=dict)
    blocked_since: dict[str, float] = field(default_factory=dict)
    #: when a signal came or the screen rules last read a state (an input line, work, a
    #: dialog, a blocker); said: the peer was reported unrecognised since
    recognised_at: float = 0.0
    unrecognised_said: bool = False
    _screen_key: str = ""

    def __post_init__(self) -> None:
        self.last_progress = self.last_progress or self.launched
        self.recognised_at = self.recognised_at or self.launched

    def observe(self, now: float, reading: Reading | None, signals: Sequence[Signal] = (),
                submitted: bool = False, screen: str = "") -> list[Decision]:
        """What to do after one look. submitted: our last message shows as sent."""
        decisions = [d for s in signals for d in self._signal(now, s)]
        if signals or (reading is not None and reading.state != STARTING):
            self.recognised_at, self.unrecognised_said = now, False
        if screen:
            self._progress_from(now, screen)
        if reading is not None:
            shown = self._reading(now, reading, submitted)
            if any(d.state.startswith("dialog (") for d in shown):
                # the permission hook and the dialog on screen are one event: the screen
                # names the question
                decisions = [d for d in decisions if d.state != WAITING_FOR_PERMISSION]
            decisions += shown
        return decisions + self._clock(now, reading)

    def _signal(self, now: float, signal: Signal) -> list[Decision]:
        self.last_progress = now
        if signal.event == PROMPT:
            self.arrived, self.ended_at, self.ended_by_hook = True, None, False
            self.started_by_hook, self.ready_since, self.prompted_at = True, None, now
            return self._note("working",
                              f"hook {signal.hook('UserPromptSubmit')}: the prompt arrived")
        if signal.event == STOP and self.arrived:
            # the screen may have shown the end a moment before the hook ran: the hook is
            # the better evidence, the time stays the first sign's
            seen = f" (the screen showed it too: {self.ended_by})" if self.ended_at else ""
            hook = f"hook {signal.hook('Stop')}"
            self.ended_at, self.ended_by = self.ended_at or now, hook + seen
            self.ended_by_hook = True
            return self._note("turn-ended", f"{hook}: the turn ended")
        if signal.event == NOTIFICATION and signal.data.get("notification_type") == \
                "permission_prompt":
            return [Decision(Action.ESCALATE, WAITING_FOR_PERMISSION,
                             f"hook Notification: {signal.detail()}", fix=PERMISSION_FIX)]
        if signal.event == PERMISSION:
            return [Decision(Action.ESCALATE, WAITING_FOR_PERMISSION,
                             f"hook {signal.hook('PermissionRequest')}: {signal.detail()}",
                             fix=PERMISSION_FIX)]
        if signal.event == NOTIFICATION:
            return [Decision(Action.NOTE, "notified", f"hook Notification: {signal.detail()}")]
        return []

    def _reading(self, now: float, reading: Reading, submitted: bool) -> list[Decision]:
        if reading.state != BLOCKED:
            self.blocked_since.clear()
        if reading.state == DIALOG and reading.dialog is not None:
            return self._dialog(reading)
        if reading.state == BLOCKED and reading.blocker is not None:
            since = self.blocked_since.setdefault(reading.blocker.name, now)
            patience = reading.blocker.patience if self.timing.patience is None \
                else self.timing.patience
            if now - since >= patience:
                return [Decision(Action.ESCALATE, f"blocked ({reading.blocker.name})", reading.says(),
                                 fix=reading.blocker.fix)]
            return self._note(f"blocked ({reading.blocker.name})", reading.says())
        if reading.state == BUSY and (reading.settling or self.ended_by_hook):
            return []  # the turn's own end-of-turn hooks, or a screen lagging behind them
        if reading.state == BUSY:
            self.arrived, self.ended_at, self.ready_since = True, None, None
            return self._note("working", reading.says())
        if reading.state == READY:
            if submitted or reading.turn_ended:
                self.arrived = True
            if self.started_by_hook and not reading.turn_ended and self.ended_at is None:
                self.ready_since = self.ready_since or now
                if now - self.ready_since < HOOKED_READY:
                    return []  # an input line shown while it works, or a screen lagging
                return self._end(now, f"{reading.says()} (for {now - self.ready_since:.0f}s, "
                                      "with no Stop hook)")
            if self.arrived and self.ended_at is None:
                return self._end(now, reading.says())
            if not self.arrived:
                return self._note("ready", reading.says())
        return []

    def _end(self, now: float, evidence: str) -> list[Decision]:
        self.ended_at, self.ended_by = now, evidence
        return self._note("turn-ended", evidence)

    def _dialog(self, reading: Reading) -> list[Decision]:
        dialog = reading.dialog
        assert dialog is not None
        times = self.answered.get(dialog.name, 0)
        if dialog.keys and dialog.name in self.answer and times < ANSWERS_PER_DIALOG:
            self.answered[dialog.name] = times + 1
            return [Decision(Action.ANSWER, f"dialog ({dialog.name})", reading.says(),
                             keys=dialog.keys, fix=dialog.means, dialog=dialog.name)]
        why = "" if dialog.keys and dialog.name not in self.answer else \
            " (handoff never answers it)" if not dialog.keys else " (answered twice already)"
        return [Decision(Action.ESCALATE, f"dialog ({dialog.name})", reading.says() + why,
                         fix=dialog.fix)]

    def _clock(self, now: float, reading: Reading | None) -> list[Decision]:
        due = self._deadlines(now, reading)
        # a person asked now is told what the screen showed: saying it cannot be read is moot
        return due if any(d.action == Action.ESCALATE for d in due) else \
            self._unrecognised(now, reading) + due

    def _unrecognised(self, now: float, reading: Reading | None) -> list[Decision]:
        """Said once per spell: a peer nothing can be read of may be working or stuck, and a
        person should know before stall_timeout (the ticket goes on)."""
        quiet = now - self.recognised_at
        if self.unrecognised_said or reading is None or quiet < self.timing.unrecognised:
            return []
        self.unrecognised_said = True
        return [Decision(Action.UNRECOGNISED, "screen-unrecognised",
                         f"no hook signal and no screen rule matched for {quiet:.0f}s",
                         fix="attach to see what it does; if its CLI's screen changed in a "
                             "release, set roles.<role>.markers (composer, busy, turn_ended) "
                             "until handoff knows it")]

    def _deadlines(self, now: float, reading: Reading | None) -> list[Decision]:
        if self.ended_at is not None and now - self.ended_at >= self.timing.grace:
            evidence = f"{self.ended_by}; no report {now - self.ended_at:.0f}s later"
            if self.nudged < self.timing.nudges:
                self.nudged += 1
                self.arrived, self.ended_at = False, None
                return [Decision(Action.NUDGE, "turn-ended", evidence)]
            return [Decision(Action.ESCALATE, "turn-ended",
                             f"{evidence}, after {self.nudged} nudge(s)",
                             fix="attach to see why it stopped; 'handoff answer' tells it how "
                                 "to go on")]
        state = reading.state if reading else ""
        if not self.arrived and state in (STARTING, READY, "") and \
                now - self.launched >= self.timing.start:
            return [Decision(Action.ESCALATE, "starting", f"the prompt never arrived "
                             f"{now - self.launched:.0f}s after launch ({state or 'no screen'})",
                             fix="attach to see what the CLI shows; raise start_timeout in "
                                 f"{self.timing.file('start_timeout')} if it is only slow")]
        if now - self.last_progress >= self.timing.stall and self.ended_at is None:
            return [Decision(Action.ESCALATE, "stalled", f"nothing changed on screen or in hooks for "
                             f"{now - self.last_progress:.0f}s",
                             fix="attach to see what it is doing; raise stall_timeout in "
                                 f"{self.timing.file('stall_timeout')} for work that is "
                                 "legitimately this slow")]
        return []

    def next_look(self, now: float, hooks: bool) -> float:
        """Seconds until the peer must be looked at again (its death, a report and its hooks'
        signals wake the orchestrator sooner): often while it starts or is blocked, then when
        one of its clocks runs out (the grace after a turn's end, a stall), at the latest
        after the interval its kind of evidence needs."""
        if not self.arrived:
            return STARTING_LOOK
        turn_begins = self.prompted_at is not None and now - self.prompted_at < HOOKED_LOOK
        interval = WORKING_LOOK if self.blocked_since or not hooks or turn_begins \
            else HOOKED_LOOK
        due = [self.last_progress + self.timing.stall]
        if not self.unrecognised_said:
            due.append(self.recognised_at + self.timing.unrecognised)
        if self.ended_at is not None:
            due.append(self.ended_at + self.timing.grace)
        if self.ready_since is not None and self.ended_at is None:
            due.append(self.ready_since + HOOKED_READY)
        return max(0.0, min(interval, *(at - now for at in due)))

    def _progress_from(self, now: float, screen: str) -> None:
        """A changed screen is progress; spinners, timers and token counters are not."""
        key = _NOISE.sub("", screen)
        key = "\n".join(line for line in key.splitlines() if "esc to" not in line)
        if key != self._screen_key:
            self._screen_key = key
            self.last_progress = now

    def _note(self, state: str, evidence: str) -> list[Decision]:
        if state == self.noted:
            return []
        self.noted = state
        return [Decision(Action.NOTE, state, evidence)]

    def after_nudge_or_answer(self, now: float) -> None:
        """A message went to the peer: its next turn is judged afresh."""
        self.arrived, self.ended_at, self.noted, self.ended_by_hook = False, None, "", False
        self.started_by_hook, self.ready_since = False, None
        self.last_progress = now


__all__ = ["READY", "Decision", "PeerMonitor", "Timing"]

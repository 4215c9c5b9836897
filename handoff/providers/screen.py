"""Reading a coding CLI's screen: pure functions over captured text, no tmux here.

A provider describes its CLI's screen as `ScreenRules` (data: the composer's prefix, the
busy and turn-finished markers, the dialogs and blockers it can show); `ScreenRules.read`
turns one capture of the visible screen into a `Reading`: what state the CLI is in, what
sits in its input line, and the exact lines that decided it (the evidence every judgement
about a peer carries into the event log).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STARTING, READY, BUSY, DIALOG, BLOCKED = "starting", "ready", "busy", "dialog", "blocked"


@dataclass(frozen=True)
class Dialog:
    """A screen that blocks the CLI until a person (or handoff, when allowed) answers it."""

    name: str
    #: every one of these must be on the screen (plain substrings)
    markers: tuple[str, ...]
    #: tmux key names that answer it so the CLI goes on; () when handoff must never answer
    keys: tuple[str, ...]
    #: what a person does so that it never shows again
    fix: str
    #: what answering it means, for the event log ("trusts the folder")
    means: str = ""


@dataclass(frozen=True)
class Blocker:
    """A state the CLI cannot leave by itself: not logged in, no API, out of quota."""

    name: str
    pattern: str
    fix: str
    #: seconds it must persist before it counts (the CLI retries by itself meanwhile)
    patience: float = 0.0


@dataclass(frozen=True)
class Reading:
    state: str
    #: the text in the input line ('' when empty); None when no input line is on screen
    draft: str | None = None
    dialog: Dialog | None = None
    blocker: Blocker | None = None
    #: a turn-finished marker is the last thing above the input line
    turn_ended: bool = False
    #: busy only finishing the turn (running its end-of-turn hooks): no new work
    settling: bool = False
    #: the screen lines that decided the state
    evidence: tuple[str, ...] = ()

    def says(self) -> str:
        """One line for an event: the state and what it was read from."""
        what = self.dialog.name if self.dialog else self.blocker.name if self.blocker else ""
        shown = " | ".join(line.strip()[:120] for line in self.evidence[:3])
        return f"{self.state}{f' ({what})' if what else ''}: {shown}" if shown else self.state


def lines_of(screen: str) -> list[str]:
    # Claude Code draws its input line as "❯" and a no-break space
    return [line.replace("\u00a0", " ").rstrip() for line in screen.splitlines()]


@dataclass(frozen=True)
class ScreenRules:
    #: the input line starts with this; the *last* such line is the input line (earlier
    #: ones are submitted messages echoed above it)
    composer: str
    busy: tuple[str, ...] = ()
    turn_ended: tuple[str, ...] = ()
    dialogs: tuple[Dialog, ...] = ()
    blockers: tuple[Blocker, ...] = ()
    #: texts an empty input line shows in place of a draft (matched as prefixes)
    placeholders: tuple[str, ...] = ()
    #: the input line sits just below a rule of this character (a menu below it may start
    #: with the composer's prefix too)
    rule: str = ""
    #: busy lines that only finish a turn (e.g. its Stop hook running)
    settling: tuple[str, ...] = ()

    def read(self, screen: str) -> Reading:
        lines = lines_of(screen)
        dialog = self.dialog_on(lines)
        if dialog is not None:
            shown = tuple(line for line in lines if any(m in line for m in dialog.markers))
            return Reading(DIALOG, dialog=dialog, evidence=shown)
        blocker, blocked_line = self.blocker_on(lines)
        if blocker is not None:
            return Reading(BLOCKED, draft=self.draft(lines), blocker=blocker,
                           evidence=(blocked_line,))
        ended = self._last(lines, self.turn_ended)
        busy = [line for line in lines[(ended or -1) + 1:]
                if any(re.search(p, line) for p in self.busy)]
        draft = self.draft(lines)
        if busy:
            settling = any(re.search(p, line) for line in busy for p in self.settling)
            return Reading(BUSY, draft=draft, evidence=tuple(busy[-2:]), settling=settling)
        marker = self.ended_marker(lines)
        if draft is None and ended is None:
            return Reading(STARTING)
        if draft is None:  # a CLI without an input line: its last marker says it all
            return Reading(READY, turn_ended=True, evidence=(lines[ended or 0],))
        return Reading(READY, draft=draft, turn_ended=marker is not None,
                       evidence=(marker,) if marker else (self.composer_line(lines) or "",))

    def _last(self, lines: list[str], patterns: tuple[str, ...]) -> int | None:
        for i in range(len(lines) - 1, -1, -1):
            if any(re.search(p, lines[i]) for p in patterns):
                return i
        return None

    def dialog_on(self, lines: list[str]) -> Dialog | None:
        text = "\n".join(lines)
        for dialog in self.dialogs:
            if all(marker in text for marker in dialog.markers):
                return dialog
        return None

    def blocker_on(self, lines: list[str]) -> tuple[Blocker | None, str]:
        """The blocker shown below the last submitted message (an old error scrolled up and
        answered since does not count)."""
        start = self._last_echo(lines)
        for line in reversed(lines[start:]):
            for blocker in self.blockers:
                match = re.search(blocker.pattern, line)
                if match:  # the matched words, with a little context: lines can be wide
                    return blocker, line[max(0, match.start() - 40):match.end() + 80].strip()
        return None, ""

    def composer_index(self, lines: list[str]) -> int | None:
        found = [i for i in range(len(lines)) if self._is_composer(lines[i])]
        if self.rule:  # flush left, right under the box's top rule
            boxed = [i for i in found if i > 0 and lines[i - 1].lstrip().startswith(self.rule)
                     and not lines[i][:1].isspace()]
            found = boxed or found
        return found[-1] if found else None

    def _is_composer(self, line: str) -> bool:
        stripped = line.lstrip()
        bare = self.composer.strip()
        # "❯" alone, or "❯" + space + text: never a word that merely starts with the glyph
        return stripped == bare or stripped.startswith(bare + " ")

    def composer_line(self, lines: list[str]) -> str | None:
        index = self.composer_index(lines)
        return None if index is None else lines[index]

    def draft(self, lines: list[str]) -> str | None:
        line = self.composer_line(lines)
        if line is None:
            return None
        text = line.lstrip()[len(self.composer.strip()):]
        text = text.strip()
        if any(text.startswith(p) for p in self.placeholders):
            return ""
        return text

    def _last_echo(self, lines: list[str]) -> int:
        """Index of the newest submitted message (a composer-prefixed line above the input)."""
        composer = self.composer_index(lines)
        if composer is None:
            composer = len(lines)
        for i in range(composer - 1, -1, -1):
            if self._is_composer(lines[i]):
                return i
        return 0

    def ended_marker(self, lines: list[str]) -> str | None:
        """A turn-finished line below the newest submitted message, if one is shown."""
        composer = self.composer_index(lines)
        end = len(lines) if composer is None else composer
        for line in lines[self._last_echo(lines):end]:
            if any(re.search(p, line) for p in self.turn_ended):
                return line
        return None

    def submitted(self, screen: str, message: str) -> bool:
        """message shows above the input line as a submitted prompt (not in the draft).

        CLIs wrap a long prompt onto indented lines of their own: the text is compared with
        all whitespace collapsed, whole (two briefs share a long path prefix)."""
        lines = lines_of(screen)
        composer = self.composer_index(lines)
        above = lines if composer is None else lines[:composer]
        return collapsed(message) in collapsed("\n".join(above))


def collapsed(text: str) -> str:
    return " ".join(text.split())


def holds(draft: str | None, message: str) -> bool:
    """The input line holds (the start of) message: our own text, not a person's draft."""
    if not draft:
        return False
    return collapsed(message).startswith(collapsed(draft)) or \
        collapsed(draft).startswith(collapsed(message))

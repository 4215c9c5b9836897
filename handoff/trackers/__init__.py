"""Tickets from an issue tracker: the seam every tracker adapter fills (docs/trackers.md).

An adapter reads an issue through the person's own CLI (gh for GitHub: handoff.trackers.github)
and gives a `TrackedIssue`. Whatever a tracker returns was typed by someone on the internet, so
a `TrackedIssue` cleans and bounds its own fields when it is made: no adapter can forget to,
and a title can never move this terminal's cursor nor a body fill a planner's brief.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from handoff.errors import ExternalFailure
from handoff.loop.testcount import ANSI
from handoff.machinery.credentials import redact
from handoff.operations.remote import printable

#: characters kept of an issue's title, its note included when it is cut
TITLE_LIMIT = 200
#: characters kept of an issue's body, its note included when it is cut
BODY_LIMIT = 20_000
#: characters kept of an issue's address (a real one is far shorter)
URL_LIMIT = 2_000
#: characters kept of a label's name (GitHub allows 50), and labels kept of one issue
LABEL_LIMIT = 100
LABELS_KEPT = 100
#: characters kept of an issue's state ("open", "closed")
STATE_LIMIT = 20
#: the short prefix a tracker's ticket ids start with; a tracker not named here uses its name
PREFIXES: dict[str, str] = {"github": "gh"}
#: a tracker's name: it makes the ticket id's prefix, so letters and digits only
TRACKER_NAME = re.compile(r"[a-z][a-z0-9]{0,15}")
#: an issue's ref as a ticket id can hold it: GitHub's 123, Jira's and Linear's PROJ-123
REF = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")
REF_LIMIT = 40


@dataclass(frozen=True)
class TrackedIssue:
    """One issue of a tracker, cleaned and bounded: what `handoff start --issue` plans from."""

    #: the tracker's name ("github")
    tracker: str
    #: the issue's own name in its tracker, as text ("123")
    ref: str
    title: str
    body: str
    #: where a person reads the issue
    url: str
    labels: tuple[str, ...]
    #: the issue's state as its tracker says it, lower case: a closed issue is returned too
    state: str = "open"

    def __post_init__(self) -> None:
        if not TRACKER_NAME.fullmatch(self.tracker):
            raise ValueError(f"a tracker's name is lower-case letters and digits: {self.tracker!r}")
        if len(self.ref) > REF_LIMIT or not REF.fullmatch(self.ref):
            raise ExternalFailure(f"{self.tracker} named an issue {one_line(self.ref)[:REF_LIMIT]!r}, "
                                  "which handoff cannot make a ticket id of",
                                  "an issue's ref is letters and digits, parts joined by '-'")
        # a frozen dataclass sets its own fields only this way; each field is cleaned once here
        # (and again, unchanged, by dataclasses.replace: cleaning clean text changes nothing).
        # The address is echoed in messages and in the ticket: never with a URL's credentials
        url = bounded(redact(one_line(self.url)), URL_LIMIT, "")
        title = one_line(self.title)
        body = cleaned(self.body).strip()
        object.__setattr__(self, "url", url)
        object.__setattr__(self, "title", bounded(title, TITLE_LIMIT,
                                                  f" … (cut here: {len(title):,} characters in all)"))
        object.__setattr__(self, "body", bounded(body, BODY_LIMIT,
                                                 f"\n\n… (cut here: the body has {len(body):,} "
                                                 f"characters; read all of it at {url})"))
        labels = (bounded(one_line(label), LABEL_LIMIT, "…") for label in self.labels)
        object.__setattr__(self, "labels", tuple(label for label in labels if label)[:LABELS_KEPT])
        object.__setattr__(self, "state", bounded(one_line(self.state).lower(), STATE_LIMIT, ""))

    @property
    def ticket_id(self) -> str:
        """The handoff ticket this issue becomes: gh-123 (a valid ticket id: REF allows only
        letters, digits and single dashes, and prefix and ref fit its 64 characters)."""
        return f"{PREFIXES.get(self.tracker, self.tracker)}-{self.ref}"

    @property
    def text(self) -> str:
        """The ticket's text, as a planner is given it: the title as a heading, the body, and
        where it came from."""
        source = f"(from {self.url or f'{self.tracker} issue {self.ref}'}"
        if self.labels:
            source += f"; labels: {', '.join(self.labels)}"
        if self.state and self.state != "open":
            source += f"; the issue is {self.state}"
        parts = [f"# {self.title or f'{self.tracker} issue {self.ref}'}", self.body, source + ")"]
        return "\n\n".join(part for part in parts if part) + "\n"


class Tracker(Protocol):
    """What an adapter of one tracker does (docs/trackers.md). Its failures are HandoffErrors,
    each one line and a hint: MissingTool (its CLI is not installed), UsageError (a ref or
    label it cannot be), NotFound (no such issue), ExternalFailure (not logged in, no answer,
    an answer it does not understand)."""

    name: str

    def fetch(self, ref: str) -> TrackedIssue:
        """The issue ref names, open or closed."""
        ...

    def labelled(self, label: str, limit: int = 50) -> list[str]:
        """The refs of the open issues carrying label, oldest first, at most limit of them."""
        ...


def cleaned(text: str) -> str:
    """text with nothing a terminal would take as a command: whole escape sequences (colours in
    a pasted log) out, then every other C0 and C1 control character but newline and tab. A
    carriage return becomes a newline first: a browser sends CRLF line ends, and an old Mac's
    lone CR ends a line too."""
    text = ANSI.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    clean: str = printable(text)
    return clean


def one_line(text: str) -> str:
    """cleaned text on one line, every run of white space one blank: a title, a label, a URL."""
    return " ".join(cleaned(text).split())


def bounded(text: str, limit: int, note: str) -> str:
    """text when it has at most limit characters; else its head and note, limit characters in
    all, so the cut shows where it is made."""
    if len(text) <= limit:
        return text
    return text[:max(0, limit - len(note))] + note[:limit]

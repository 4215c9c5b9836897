"""`handoff watch`: the live board, a Textual app over `handoff.operations.board`.

Only this module imports Textual, and only `handoff watch` imports this module: every other
command starts without it. The rows come from `Board`, refreshed in a thread that sleeps in the
ticket directories' watcher (handoff/machinery/watch.py) and wakes when a file there changes, with a slow
rescan as a safety net (a killed orchestrator drops its lock without touching a file).

Every key calls the same core function the matching command does (handoff/operations/); a
HandoffError shows as one line at the bottom of the board, never as a traceback.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from handoff.cli.board_keys import (
    answer,
    approve,
    on_host,
    recycle,
    repo_of,
    stop,
    ticket_from_plan,
    view,
)
from handoff.cli.board_screens import (
    SCREENS_CSS,
    AnswerScreen,
    ChoiceScreen,
    InputScreen,
    ViewScreen,
)
from handoff.errors import HandoffError
from handoff.machinery.watch import POLL_INTERVAL, Watcher
from handoff.next_steps import Verb
from handoff.operations import opening, tending
from handoff.operations.board import Board, Row
from handoff.operations.standing import in_list_order
from handoff.phases import Phase
from handoff.record.store import private_dir

#: seconds between the safety-net rescans (stats only; a ticket is read when it changed)
RESCAN = 10.0
#: seconds between two askings of the hosts with tickets of ours
HOSTS_EVERY = 5.0
COLUMNS = (("needs", "NEEDS YOU"), ("ticket", "TICKET"), ("repo", "REPO"), ("phase", "PHASE"),
           ("round", "ROUND"), ("implementer", "IMPLEMENTER"), ("reviewer", "REVIEWERS"),
           ("in_phase", "IN PHASE"), ("last", "LAST EVENT"))
PEER_WIDTH = 34
#: the ticket and repo columns (longer ones are cut; the details show them whole)
TICKET_WIDTH = 24


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


#: below this many terminal columns the board leaves out REPO and IN PHASE (the details line
#: under the table says both) so that the rest fits: at 100 columns every column is seen
NARROW = 120
#: the columns a narrow terminal leaves out
WIDE_ONLY = ("repo", "in_phase")
#: a ticket's id on a narrow terminal (the details line shows it whole)
NARROW_TICKET_WIDTH = 14


def shown_columns(columns: int) -> list[str]:
    return [key for key, _ in COLUMNS if columns >= NARROW or key not in WIDE_ONLY]


def fitted_width(columns: int) -> int:
    """How wide each peer cell and the last event may be for the whole table to fit a
    terminal of columns (the other shown columns take about 85 with their padding, 60 on a
    narrow one): PEER_WIDTH on a wide one, never under 12 (the details line shows each
    whole)."""
    return max(12, min(PEER_WIDTH, (columns - (85 if columns >= NARROW else 60)) // 3))


def _peer_cell(row: Row, role: str, width: int = PEER_WIDTH) -> str:
    peer = row.peers[role]
    return _cut(peer.state if not peer.evidence else f"{peer.state}: {peer.evidence}", width)


def _team_cell(row: Row, width: int = PEER_WIDTH) -> str:
    """The testers and reviewers: one shown as the implementer is, several by name and state
    (the details line has each one's evidence)."""
    others = row.others
    if len(others) == 1:
        return _peer_cell(row, next(iter(others)), width)
    return _cut(" · ".join(f"{role} {peer.state}" for role, peer in others.items()), width)


def cells(row: Row, now: datetime, width: int = PEER_WIDTH,
          ticket_width: int = TICKET_WIDTH) -> dict[str, str | Text]:
    """The row's cells; width: each peer cell's and the last event's (fitted_width), and
    ticket_width the ticket's id's (shorter on a narrow terminal)."""
    needs = Text(f"► {row.needs.upper()}", style="bold reverse") if row.needs else Text("")
    # a 64-character id (ids may be that long) would push every other column off the screen;
    # the details line below the table shows it whole
    return {"needs": needs, "ticket": _cut(row.ticket, ticket_width),
            "repo": _cut(row.repo_name, TICKET_WIDTH),
            "phase": f"{row.phase} {row.place}/{row.waiting}" if row.place else
            _cut(f"waiting for {', '.join(row.after)}", PEER_WIDTH)
            if row.phase == Phase.WAITING and row.after else row.phase,
            "round": f"{row.round}/{row.max_rounds}" if row.max_rounds else str(row.round),
            "implementer": _peer_cell(row, "implementer", width),
            "reviewer": _team_cell(row, width), "in_phase": row.in_phase(now),
            "last": _cut(row.last_event[10:] if row.last_event[:2].isdigit() else
                         row.last_event, width)}


def recycle_keys(roles: list[str]) -> dict[str, str]:
    """One key per peer for the recycle choice: its name's first free letter (i for the
    implementer, r for the reviewer, as before), else a digit."""
    keys: dict[str, str] = {}
    for role in roles:
        key = next((c for c in role.lower() if c.isalpha() and c not in keys), None) or \
            next(str(d) for d in range(1, 10) if str(d) not in keys)
        keys[key] = role
    return keys


def details(row: Row) -> str:
    """The selected ticket in full: each peer's state with its evidence, the reason."""
    orch = f"orchestrator pid {row.orchestrator}" if row.orchestrator else \
        "no orchestrator running"
    lines = [f"{row.ticket} in {row.repo or '?'}: {row.phase}, round {row.round}, {orch}"]
    for role, peer in row.peers.items():
        when = f" (at {peer.time[11:19]})" if peer.time else ""
        lines.append(f"  {role}: {peer.state}{when}" + (f" — {peer.evidence}"
                                                        if peer.evidence else ""))
    if row.place:  # live, where the reason it queued with is the queue as it was then
        lines.append(f"  queue: {row.place} of {row.waiting} waiting for a slot (max_parallel)")
    elif row.reason:
        lines.append(f"  why: {row.reason}")
    for other, files in row.overlaps:
        lines.append(f"  overlaps {other}: both change {', '.join(files[:5])}"
                     + (" …" if len(files) > 5 else ""))
    lines.append(f"  last: {row.last_event}")
    return "\n".join(lines)


class BoardApp(App[None]):
    ENABLE_COMMAND_PALETTE = False  # the footer names every key the board has
    CSS = """
    #title { height: 1; text-style: bold; }
    DataTable { height: 1fr; }
    #details { height: auto; max-height: 7; border-top: solid $secondary; }
    #message { height: 1; }
    """ + SCREENS_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "attach", "attach"), Binding("n", "answer", "answer"),
        Binding("y", "approve", "approve"), Binding("r", "recycle", "recycle"),
        Binding("s", "stop", "stop"), Binding("v", "view", "view plan/diff/report"),
        Binding("N", "new", "new ticket from a plan"),
        Binding("c", "closed", "closed: show/hide"),
        Binding("q", "quit", "quit")]

    def __init__(self, home: Path, repo_key: str | None = None, plain: bool = False) -> None:
        # NO_COLOR: Textual's own filter that drops every colour (ansi_color=True picks it
        # over the grey-scale one, which still writes colours)
        super().__init__(ansi_color=True if plain else None)
        self.home = home
        self.board = Board(home, repo_key)
        self.rows: dict[str, Row] = {}
        #: the IN PHASE text each row shows
        self._in_phase: dict[str, str] = {}
        #: why the board polls instead of waiting on inotify, for its title ("": it does not)
        self._polling = ""
        self._done = threading.Event()
        #: the table's columns, for the terminal's width (shown_columns)
        self.shown = [key for key, _ in COLUMNS]
        #: the closed tickets are listed too (`c`); by default they are not, as in `status`
        self.closed_shown = False
        #: every row the board has, shown or not
        self._all: list[Row] = []

    def compose(self) -> ComposeResult:
        yield Static("handoff watch", id="title")
        table: DataTable[str | Text] = DataTable(cursor_type="row", zebra_stripes=False)
        yield table
        yield Static("", id="details")
        yield Static("", id="message")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._columns(table)
        self.board.refresh()
        self.show(self.board.rows())
        table.focus()
        self.set_interval(1.0, self.tick)
        threading.Thread(target=self.follow_tickets, name="board-watch", daemon=True).start()
        threading.Thread(target=self.follow_hosts, name="board-hosts", daemon=True).start()

    def on_unmount(self) -> None:
        self._done.set()

    # ---- keeping the rows up to date ----------------------------------------------------
    def follow_tickets(self) -> None:
        """Sleep in the watcher; on a change, refresh the board and hand the rows over."""
        # HANDOFF_HOME itself is watched for a first repository: before any ticket it may not
        # exist yet, and a watcher of nothing would wake only at the RESCAN
        private_dir(self.board.home)
        while not self._done.is_set():
            folders = self.board.folders()
            with Watcher(folders) as watcher:
                if watcher.polling:
                    self._from_thread(self.say_polling, watcher.polling)
                woke = True  # a change before this watcher began is looked for at once
                recheck_at = time.monotonic() + RESCAN
                while not self._done.is_set():
                    changed = self.board.refresh()
                    if not woke and time.monotonic() >= recheck_at:
                        recheck_at = time.monotonic() + RESCAN
                        changed = self.board.recheck_orchestrators() or changed
                    if changed:
                        self._from_thread(self.show, self.board.rows())
                    if self.board.folders() != folders:
                        break  # a ticket came or went: watch the new set of folders
                    woke = watcher.wait(RESCAN)

    def follow_hosts(self) -> None:
        """Ask the hosts of the tickets placed on them every HOSTS_EVERY seconds (no file here
        changes when a host's ticket moves on); each ask is bounded (handoff.machinery.ssh)."""
        while not self._done.is_set():
            try:
                changed = self.board.ask_hosts()
            except HandoffError as exc:  # a broken config.yaml: said, and asked again
                self._from_thread(self.say, f"hosts: {exc.message}")
                changed = False
            if changed:
                self._from_thread(self.show, self.board.rows())
            self._done.wait(HOSTS_EVERY)

    def say_polling(self, why: str) -> None:
        self._polling = f" (polling every {POLL_INTERVAL} s: {why})"
        self.show(list(self.rows.values()))

    def _from_thread(self, call: Callable[..., Any], *args: Any) -> None:
        try:
            self.call_from_thread(call, *args)
        except RuntimeError:  # the app has ended meanwhile
            self._done.set()

    def show(self, rows: list[Row]) -> None:
        """The rows as `status` lists them: what waits for you first, then by activity; the
        closed ones only when asked for (`c`)."""
        self._all = rows
        listed = in_list_order((row for row in rows
                                if self.closed_shown or row.phase != Phase.CLOSED),
                               lambda row: row.phase, lambda row: row.phase_since)
        table: DataTable[str | Text] = self.query_one(DataTable)
        now = datetime.now(UTC)
        fresh = {row.key: row for row in listed}
        if list(fresh) != list(self.rows):  # a ticket came, went or moved: drawn afresh
            selected = self.selected()
            table.clear()
            for key, row in fresh.items():
                shown = cells(row, now, self.width, self.ticket_width)
                table.add_row(*(shown[c] for c in self.shown), key=key)
            if selected is not None and selected.key in fresh:
                table.move_cursor(row=list(fresh).index(selected.key))
        else:
            for key, row in fresh.items():
                if row != self.rows[key]:
                    for column, value in cells(row, now, self.width, self.ticket_width).items():
                        if column in self.shown:
                            table.update_cell(key, column, value)
        self.rows = fresh
        self._in_phase = {key: row.in_phase(now) for key, row in fresh.items()}
        waiting = sum(1 for row in listed if row.needs)
        hidden = sum(1 for row in rows if row.phase == Phase.CLOSED) if not self.closed_shown \
            else 0
        self.query_one("#title", Static).update(
            f"handoff watch — {len(listed)} ticket(s)" + (f", {waiting} need you" if waiting
                                                          else "")
            + (f" ({hidden} closed hidden: c shows them)" if hidden else "") + self._polling)
        self.show_details()

    @property
    def width(self) -> int:
        """Each peer cell's width for this terminal: the table fits it (at 100 columns too)."""
        return fitted_width(self.size.width)

    @property
    def ticket_width(self) -> int:
        return TICKET_WIDTH if self.size.width >= NARROW else NARROW_TICKET_WIDTH

    def _columns(self, table: DataTable[str | Text]) -> None:
        """The table's columns for this terminal's width (shown_columns), and no row yet."""
        table.clear(columns=True)
        self.rows = {}
        self.shown = shown_columns(self.size.width)
        labels = dict(COLUMNS)
        for key in self.shown:
            table.add_column(labels[key], key=key)

    def on_resize(self, _: events.Resize) -> None:
        tables = self.query(DataTable)
        if not tables:  # before the board is composed
            return
        table: DataTable[str | Text] = tables.first()
        if shown_columns(self.size.width) != self.shown or not table.columns:
            self._columns(table)
        self.rows = {}  # every row drawn afresh at the new width
        self.show(self._all)

    def action_closed(self) -> None:
        self.closed_shown = not self.closed_shown
        self.show(self._all)
        self.say("closed tickets shown" if self.closed_shown else "closed tickets hidden")

    def tick(self) -> None:
        """Time in phase moves on with no file changing: only that column is redrawn."""
        table: DataTable[str | Text] = self.query_one(DataTable)
        now = datetime.now(UTC)
        for key, row in self.rows.items():
            text = row.in_phase(now)
            if self._in_phase.get(key) != text:  # asking the table each second costs 5% CPU
                self._in_phase[key] = text
                if "in_phase" in self.shown:
                    table.update_cell(key, "in_phase", text)

    def selected(self) -> Row | None:
        table: DataTable[str | Text] = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return self.rows.get(str(key))

    def show_details(self) -> None:
        row = self.selected()
        text = details(row) if row else \
            "no tickets yet: handoff start TICKET --plan plan.md (or try handoff demo)"
        self.query_one("#details", Static).update(Text(text))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self.show_details()

    def say(self, text: str) -> None:
        self.query_one("#message", Static).update(Text(text))

    # ---- the keys -----------------------------------------------------------------------
    def in_background(self, what: str, action: Callable[[], str]) -> None:
        """action in a thread (stopping peers takes seconds): its result or its error in one
        line on the board."""
        self.say(f"{what}…")

        def work() -> None:
            try:
                text = action()
            except HandoffError as exc:
                text = f"error: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else "")
            except Exception as exc:  # the board stays up: one line, not a traceback
                text = f"error: {what} failed: {exc!r}"
            self._from_thread(self.say, " ".join(text.split()))

        self.run_worker(work, thread=True, group="actions")

    def _ticket(self) -> Row | None:
        row = self.selected()
        if row is None:
            self.say("no ticket selected")
        return row

    def action_attach(self) -> None:
        row = self._ticket()
        if row is None:
            return
        try:
            if row.host:
                argv = on_host(self.home, row, ["attach", row.ticket], terminal=True)[0]
            else:
                ws = opening.open_ticket(self.home, row.ticket, repo_of(row))
                argv = tending.attach_argv(ws, None)
        except HandoffError as exc:
            self.say(f"error: {exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""))
            return
        env = {k: v for k, v in os.environ.items() if k != "TMUX"}  # as `handoff attach`
        with self.suspend():
            # the person's own session: as long as they stay attached (Ctrl-b d comes back)
            subprocess.run(argv, env=env, check=False)
        self.say(f"back from {row.ticket}")

    def action_answer(self) -> None:
        row = self._ticket()
        if row is None:
            return
        refusal = row.refusal(Verb.ANSWER)
        if refusal:
            self.say(refusal)
            return

        def answered(text: str | None) -> None:
            if text:
                self.in_background(f"answering {row.ticket}", lambda: answer(self.home, row, text))

        self.push_screen(AnswerScreen(row.ticket), answered)

    def action_approve(self) -> None:
        row = self._ticket()
        if row is None:
            return
        refusal = row.refusal(Verb.APPROVE)
        if refusal:
            self.say(refusal)
            return
        self.in_background(f"approving {row.ticket}", lambda: approve(self.home, row))

    def action_recycle(self) -> None:
        row = self._ticket()
        if row is None:
            return

        def chosen(role: str | None) -> None:
            if role:
                self.in_background(f"recycling the {role} of {row.ticket}",
                                lambda: recycle(self.home, row, role))

        self.push_screen(ChoiceScreen(f"Recycle which peer of {row.ticket}?",
                                      recycle_keys(list(row.peers))), chosen)

    def action_stop(self) -> None:
        row = self._ticket()
        if row is None:
            return

        def confirmed(yes: str | None) -> None:
            if yes:
                self.in_background(f"stopping {row.ticket}", lambda: stop(self.home, row))

        self.push_screen(ChoiceScreen(f"Stop {row.ticket}? ('handoff resume' carries it on)",
                                      {"y": "stop it"}), confirmed)

    def action_new(self) -> None:
        """A ticket from a plan file, in the repository the board was started in: it waits
        for approval on the board (as `handoff start` with nobody at a terminal leaves it)."""
        def given(path: str | None) -> None:
            if path and path.strip():
                self.in_background("making a ticket",
                                   lambda: ticket_from_plan(self.home, path, Path.cwd()))

        self.push_screen(InputScreen("Plan file for a new ticket"), given)

    def action_view(self) -> None:
        """The selected ticket's plan, its change as a diff, or its last report, to read."""
        row = self._ticket()
        if row is None:
            return

        def chosen(what: str | None) -> None:
            if what is None:
                return
            try:
                title, text = view(self.home, row, what)
            except HandoffError as exc:
                self.say(f"{exc.message}" + (f" (hint: {exc.hint})" if exc.hint else ""))
                return
            self.push_screen(ViewScreen(title, text))

        self.push_screen(ChoiceScreen(f"Read what of {row.ticket}?",
                                      {"p": "plan", "d": "diff", "l": "last report"}), chosen)

    async def action_quit(self) -> None:
        self._done.set()
        self.exit()


def run(home: Path, repo_key: str | None, plain: bool) -> None:
    if not plain:
        # Textual greys out on NO_COLOR set to anything; handoff's convention is "non-empty"
        os.environ.pop("NO_COLOR", None)
    # COLUMNS and LINES, when exported, tell the size of the terminal they were set in, and
    # Textual would take them over this one's (and keep them through every resize)
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
    BoardApp(home, repo_key, plain).run()

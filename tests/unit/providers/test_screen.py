"""Screen reading over screens captured from the real CLIs (tests/fixtures/screens/*/README.md
says how each was made). The expected states are what a person sees on each screen."""

from __future__ import annotations

import pytest

from handoff.providers import Provider, RoleSpec, get
from handoff.providers.screen import BLOCKED, BUSY, DIALOG, READY, STARTING
from tests.paths import TESTS

SCREENS = TESTS / "fixtures" / "screens"


def screen(provider: str, name: str) -> str:
    return (SCREENS / provider / f"{name}.txt").read_text(encoding="utf-8")


def cli(name: str) -> Provider:
    return get(RoleSpec(provider=name))


# (fixture, state, draft, dialog or blocker, turn ended)
CLAUDE = [
    ("ready", READY, "", None, True),
    ("ready-fresh", READY, "", None, False),
    ("ready-altscreen", READY, "", None, True),
    ("turn-finished", READY, "", None, True),
    ("named", READY, "", None, True),
    ("busy", BUSY, "", None, False),
    ("busy-altscreen", BUSY, "", None, False),
    ("queued", BUSY, "", None, False),
    ("draft", READY, "A draft that is typed but not sent", None, True),
    ("pasted-long", READY, "[Pasted text #1]", None, True),
    ("trust", DIALOG, None, "trust", False),
    ("api-key", DIALOG, None, "api-key", False),
    ("bypass", DIALOG, None, "bypass", False),
    ("mcp", DIALOG, None, "mcp", False),
    ("settings-error", DIALOG, None, "settings-error", False),
    ("settings-warning", DIALOG, None, "unknown-dialog", False),
    ("permission", DIALOG, None, "permission", False),
    ("not-logged-in", BLOCKED, "", "not-logged-in", False),
    ("connection-refused", BLOCKED, "", "unreachable", False),
]


def check(provider: str, name: str, state: str, draft: str | None, what: str | None,
          ended: bool | None = None) -> None:
    """One captured screen reads as a person reads it: state, input line, what blocks it."""
    reading = cli(provider).read(screen(provider, name))
    assert reading.state == state, reading.says()
    if state != DIALOG:
        assert reading.draft == draft
    named = reading.dialog.name if reading.dialog else reading.blocker.name if reading.blocker \
        else None
    assert named == what
    if ended is not None:
        assert reading.turn_ended is ended
    if state != STARTING:
        assert reading.evidence and all(reading.evidence), "every reading names its evidence"


@pytest.mark.parametrize(("name", "state", "draft", "what", "ended"), CLAUDE)
def test_claude_code_screens(name: str, state: str, draft: str | None, what: str | None,
                             ended: bool) -> None:
    check("claude", name, state, draft, what, ended)


def test_claude_dialogs_are_answered_with_the_keys_that_pick_go_on() -> None:
    """The default option is the one that stops (No, exit): answering means moving first."""
    claude = cli("claude")
    keys = {name: claude.read(screen("claude", name)).dialog for name in
            ("trust", "api-key", "bypass", "mcp", "settings-error")}
    assert {n: d.keys for n, d in keys.items() if d} == {
        "trust": ("Down", "Enter"), "api-key": ("Up", "Enter"), "bypass": ("Down", "Enter"),
        "mcp": ("Enter",), "settings-error": ()}


def test_claude_a_submitted_message_shows_above_the_input_line_not_in_it() -> None:
    claude = cli("claude")
    assert claude.rules.submitted(screen("claude", "ready"), "Say hello")
    assert not claude.rules.submitted(screen("claude", "ready"), "Read and follow /x/brief-2.md")
    assert claude.taken(screen("claude", "queued"), "A message sent while busy")
    draft = "A draft that is typed but not sent"
    assert not claude.taken(screen("claude", "draft"), draft), "a draft is not taken"


def test_claude_the_slash_menu_below_the_input_line_is_not_the_input_line() -> None:
    reading = cli("claude").read(screen("claude", "exit-typed"))
    assert reading.draft == "/exit"


def test_a_screen_with_nothing_known_on_it_is_starting() -> None:
    assert cli("claude").read("").state == STARTING
    assert cli("codex").read("Loading…\n").state == STARTING


def test_claude_running_its_stop_hook_is_busy_only_settling() -> None:
    text = screen("claude", "busy").replace("Processing… (3s", "Processing… (running Stop hook · 3s")
    reading = cli("claude").read(text)
    assert reading.state == BUSY and reading.settling
    assert cli("claude").read(screen("claude", "busy")).settling is False


CODEX = [
    ("ready", READY, "", None, True),
    ("ready-fresh", READY, "", None, False),
    ("turn-finished", READY, "", None, True),
    ("busy", BUSY, "", None, False),
    ("busy-thinking", BUSY, "", None, False),
    ("queued", BUSY, "", None, False),
    ("draft", READY, "Please also update the README", None, False),
    ("trust", DIALOG, None, "trust", False),
    ("sign-in", DIALOG, None, "sign-in", False),
    ("connection-refused", BLOCKED, "", "unreachable", False),
    ("quota", BLOCKED, "", "quota", False),
]


@pytest.mark.parametrize(("name", "state", "draft", "what", "ended"), CODEX)
def test_codex_screens(name: str, state: str, draft: str | None, what: str | None,
                       ended: bool) -> None:
    check("codex", name, state, draft, what, ended)


def test_codex_the_title_in_its_status_line_is_not_a_sent_message() -> None:
    """The status line under the input line repeats the session's title: only what is above
    the input line counts as sent."""
    codex = cli("codex")
    assert not codex.rules.submitted(screen("codex", "ready-fresh"), "Follow brief-1.md")
    assert codex.taken(screen("codex", "queued"), "Also check the README.")


GEMINI = [
    ("ready", READY, "", None),
    ("busy", BUSY, "", None),
    ("queued-while-busy", BUSY, "", None),
    ("draft", READY, "Please check the failing test in tests/test_cli.py", None),
    ("trust", DIALOG, None, "trust"),
    ("auth", DIALOG, None, "auth"),
    ("api-key-entry", DIALOG, None, "api-key-entry"),
    ("error", BLOCKED, "", "unreachable"),
]


@pytest.mark.parametrize(("name", "state", "draft", "what"), GEMINI)
def test_gemini_screens(name: str, state: str, draft: str | None, what: str | None) -> None:
    check("gemini", name, state, draft, what)


def test_gemini_in_its_default_approval_mode_reads_the_other_input_line() -> None:
    gemini = get(RoleSpec(provider="gemini", permission_mode="default"))
    reading = gemini.read(screen("gemini", "ready-after-auth"))
    assert (reading.state, reading.draft) == (READY, "")
    assert cli("gemini").read(screen("gemini", "ready-after-auth")).state == STARTING


def test_gemini_a_sent_prompt_shows_above_the_input_line() -> None:
    assert cli("gemini").taken(screen("gemini", "busy"), "Read and follow /tmp/x/brief-1.md")
    assert not cli("gemini").taken(screen("gemini", "ready"), "Read and follow /tmp/x/brief-1.md")


OPENCODE = [
    ("ready", READY, "", None),
    ("ready-in-session", READY, "", None),
    ("draft", READY, "Please check the failing test in tests/test_cli.py", None),
    ("draft-in-session", READY, "draft two", None),
    ("busy", BUSY, "", None),
    ("retrying", BLOCKED, "", "unreachable"),
    ("error", BLOCKED, "", "unreachable"),
]


@pytest.mark.parametrize(("name", "state", "draft", "what"), OPENCODE)
def test_opencode_screens(name: str, state: str, draft: str | None, what: str | None) -> None:
    check("opencode", name, state, draft, what)


def test_opencode_a_sent_prompt_is_the_bubble_above_the_input_box() -> None:
    opencode = cli("opencode")
    assert opencode.taken(screen("opencode", "busy"), "Read and follow /tmp/x/brief-1.md")
    assert not opencode.taken(screen("opencode", "ready"), "Read and follow /tmp/x/brief-1.md")

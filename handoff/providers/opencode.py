"""opencode (`opencode`, npm opencode-ai), start-up measured on 1.18.

`opencode DIR --auto --prompt MESSAGE`: DIR is the project, `--auto` lets it act without
asking. It draws in the alternate screen: a transcript holds the last screen (its own session
store under ~/.local/share/opencode keeps the rest). Its input line sits in a box of "┃"
lines closed by "╹▀▀▀", above the agent/model line. It has no system-prompt flag for the role
contract: the brief carries it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from handoff.providers.base import Launch, Provider
from handoff.providers.screen import Blocker, ScreenRules

BAR = "┃"
#: the right-hand sidebar of the session view, and the input line's own end
_SIDEBAR = re.compile(r"\s{6,}")


@dataclass(frozen=True)
class BoxRules(ScreenRules):
    """The input line is the first non-empty line of the last "┃" box (above its agent line)."""

    def composer_index(self, lines: list[str]) -> int | None:
        bottom = next((i for i in range(len(lines) - 1, -1, -1) if "╹▀" in lines[i]), None)
        if bottom is None or bottom < 2:
            return None
        top = bottom - 1  # the agent/model line ("┃  Build · …")
        while top - 1 >= 0 and lines[top - 1].lstrip().startswith(BAR):
            top -= 1
        box = range(top, bottom - 1)
        filled = [i for i in box if _text(lines[i])]
        return filled[0] if filled else (top + 1 if top + 1 < bottom - 1 else top)

    def _last_echo(self, lines: list[str]) -> int:
        # sent messages and errors are alike "┃" bubbles: the whole page counts (it is one
        # alternate screen, so old turns scroll away)
        return 0

    def draft(self, lines: list[str]) -> str | None:
        index = self.composer_index(lines)
        if index is None:
            return None
        text = _text(lines[index])
        return "" if any(text.startswith(p) for p in self.placeholders) else text


def _text(line: str) -> str:
    text = line.strip()
    if not text.startswith(BAR):
        return ""
    return _SIDEBAR.split(text[len(BAR):].strip(), 1)[0]


RULES = BoxRules(
    composer=BAR,
    busy=(r"esc interrupt", r"esc again to interrupt"),
    blockers=(
        Blocker("unreachable", r"Cannot connect to API|Unable to connect",
                "the model API cannot be reached: check the network or the provider's "
                "base URL", patience=60.0),
        Blocker("api-error", r"Service Unavailable|Unauthorized|invalid x-api-key|"
                r"authentication_error", "read the error on the peer's screen (handoff "
                "attach TICKET --role ROLE); check the provider's key", patience=30.0),
    ),
    placeholders=("Ask anything",),
)


class Opencode(Provider):
    name = "opencode"
    binary = "opencode"
    package = "opencode-ai"
    proven = ("1.18.33", "1.18.33")
    env_allow = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
    modes = ("bypass", "default")
    exit_keys = ("/exit", "Enter")
    rules = RULES
    probe_flags = True

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary, str(launch.worktree)]
        if self.mode == "bypass":
            argv.append("--auto")
        if spec.model:
            argv += ["-m", spec.model]
        return [*argv, *spec.args, "--prompt", launch.message]

    def env(self, launch: Launch) -> dict[str, str]:
        # a peer nobody watches must not update itself mid-ticket
        return {"OPENCODE_DISABLE_AUTOUPDATE": "1"}

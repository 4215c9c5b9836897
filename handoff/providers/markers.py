"""Session markers: the variables a running coding CLI puts in its children's environment.

A peer that inherits them acts as the hidden child of the session that started handoff (Claude
Code's `CLAUDE_CODE_MESSAGING_TOKEN` even talks to that parent), so they never reach a peer or
the tmux server, whoever lists them. Everything else a CLI reads from the environment is
configuration (`CLAUDE_CODE_USE_VERTEX`, `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, …) and passes when
a person lists it, or when the provider's back-end needs it.

The rule is a reviewed list (measured: an `env` tool call inside each CLI, shared/CLI-FACTS.md)
plus narrow patterns that catch what a later release adds in the same shape. The patterns apply
only under a coding CLI's own prefix: `AWS_SESSION_TOKEN` is a credential, not a marker.
"""

from __future__ import annotations

import re

#: every name measured in a running CLI's children, with the CLI that sets it
MEASURED: dict[str, str] = {
    **dict.fromkeys((
        "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID",
        "CLAUDE_CODE_SESSION_ATTENDED", "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_CODE_CHILD_NOTES_DIR",
        "CLAUDE_CODE_EXECPATH", "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN",
        "CLAUDE_PID", "CLAUDE_EFFORT"), "Claude Code"),
    "AI_AGENT": "Claude Code",
    **dict.fromkeys((
        "CODEX_SESSION_ID", "CODEX_THREAD_ID", "CODEX_TOOL_CALL_ID", "CODEX_CI", "CODEX_VERSION",
        "CODEX_MANAGED_BY_NPM", "CODEX_MANAGED_PACKAGE_ROOT",
        "CODEX_APPLY_PATCH_PRESERVE_LINE_ENDINGS"), "Codex"),
    "GEMINI_CLI": "Gemini CLI",
    "OPENCODE": "opencode",
}

#: the prefixes of the coding CLIs' own variables, where the patterns below apply
CLI_PREFIX = r"(CLAUDE|CODEX|GEMINI_CLI|OPENCODE|AIDER|CURSOR)"
#: shapes of a session's own state: its id, its process, its channel to the parent, its tool call
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(CLI_PREFIX + shape), why) for shape, why in (
        (r"(_\w+)?_SESSION(_\w+)?", "names a running session"),
        (r"(_\w+)?_MESSAGING(_\w+)?", "is a channel into a running session"),
        (r"(_\w+)?_PID", "names a running CLI's process"),
        (r"(_\w+)?_(THREAD|TOOL_CALL|TURN)_ID", "names a running session's turn or tool call"),
        (r"(_\w+)?_CHILD(_\w+)?", "marks a child of a running session"),
        (r"_CODE_(ENTRYPOINT|EXECPATH)", "describes how a running session was started"),
        (r"_MANAGED_(BY|PACKAGE)\w*", "describes how a running CLI was installed"),
        (r"_IDE_\w+", "connects to a running CLI's IDE companion"),
    ))


def marker(name: str) -> str | None:
    """Why name is a session marker (it never passes), or None when it is not one."""
    cli = MEASURED.get(name)
    if cli is not None:
        return f"{name} is set by a running {cli} for the commands it runs"
    for pattern, why in PATTERNS:
        if pattern.fullmatch(name):
            return f"{name} {why}"
    return None


#: the hint every refusal carries
WHY = ("a coding CLI sets its session markers for the commands it runs; a peer that saw them "
       "would act as that session's hidden child. Configuration such as CLAUDE_CODE_USE_VERTEX, "
       "CLAUDE_CONFIG_DIR or CODEX_HOME passes: list it in env_allow")

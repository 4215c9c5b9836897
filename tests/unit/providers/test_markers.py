"""handoff.providers.markers: a coding CLI's session markers never pass; its configuration does."""

from __future__ import annotations

import pytest

from handoff.machinery.peers import allowlisted_env
from handoff.providers.markers import marker

#: what a Bash tool call of `env` printed inside Claude Code 2.1.332 and Codex 0.171.0
#: (shared/CLI-FACTS.md, 2026-12-01), beside what a person sets for their own set-up
MEASURED_MARKERS = (
    "CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SESSION_ID", "CLAUDE_CODE_SESSION_ATTENDED",
    "CLAUDE_CODE_CHILD_SESSION", "CLAUDE_CODE_CHILD_NOTES_DIR", "CLAUDE_CODE_EXECPATH",
    "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN", "CLAUDE_PID", "CLAUDE_EFFORT",
    "AI_AGENT", "CODEX_SESSION_ID", "CODEX_THREAD_ID", "CODEX_TOOL_CALL_ID", "CODEX_CI",
    "CODEX_VERSION", "CODEX_MANAGED_BY_NPM", "CODEX_MANAGED_PACKAGE_ROOT",
    "CODEX_APPLY_PATCH_PRESERVE_LINE_ENDINGS", "GEMINI_CLI",
)
#: the same shapes a later release could add: caught by the patterns, listed nowhere
LATER_MARKERS = ("CLAUDE_CODE_SESSION_TOKEN", "CLAUDE_CODE_PARENT_PID", "CODEX_TURN_ID",
                 "CLAUDE_CODE_MESSAGING_PORT", "CODEX_CHILD_THREAD", "GEMINI_CLI_IDE_SERVER_PORT",
                 "OPENCODE_SESSION_ID", "CODEX_MANAGED_BY_BREW")
CONFIGURATION = (
    "CLAUDE_CODE_USE_VERTEX", "CLAUDE_CODE_SKIP_VERTEX_AUTH", "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_SKIP_BEDROCK_AUTH", "CLAUDE_CONFIG_DIR", "CLAUDE_CODE_MAX_OUTPUT_TOKENS",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "CLAUDE_CODE_DISABLE_AUTOUPDATER",
    "MAX_THINKING_TOKENS", "CODEX_HOME", "ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION",
    "VERTEX_REGION_CLAUDE_4_5_SONNET", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK",
    "GEMINI_API_KEY", "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
)


@pytest.mark.parametrize("name", MEASURED_MARKERS + LATER_MARKERS)
def test_a_session_marker_is_refused_with_its_reason(name: str) -> None:
    why = marker(name)
    assert why is not None and why.startswith(name)


@pytest.mark.parametrize("name", CONFIGURATION)
def test_configuration_that_shares_a_clis_prefix_is_no_marker(name: str) -> None:
    assert marker(name) is None


def test_no_allowlist_lets_a_marker_through(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (*MEASURED_MARKERS, *CONFIGURATION):
        monkeypatch.setenv(name, "x")
    env = allowlisted_env({}, [*MEASURED_MARKERS, *CONFIGURATION])
    assert set(CONFIGURATION) <= set(env)
    assert not set(MEASURED_MARKERS) & set(env)

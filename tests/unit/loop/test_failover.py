"""handoff.loop.failover: who takes a role over when its quota is spent, and the failovers a
ticket made put back on every configuration read (no process: pure values)."""

from __future__ import annotations

from handoff.config import Config
from handoff.loop.failover import applied, taken_over
from handoff.providers import RoleSpec

CODEX, SECOND = RoleSpec(provider="codex"), RoleSpec(provider="claude", env=("CLAUDE_CONFIG_DIR",))
REVIEWER = RoleSpec(provider="claude", kind="reviewer", focus="security",
                    fallback=(CODEX, SECOND))


def test_the_next_fallback_takes_the_role_as_it_is_with_the_rest_behind_it() -> None:
    first = taken_over(REVIEWER)
    assert first is not None
    assert (first.provider, first.kind, first.focus) == ("codex", "reviewer", "security")
    assert first.fallback == (SECOND,)
    second = taken_over(first)
    assert second is not None and second.provider == "claude"
    assert second.env == ("CLAUDE_CONFIG_DIR",) and second.fallback == ()
    assert taken_over(second) is None, "none left: a person is asked"


def test_a_tickets_failovers_are_made_again_on_a_fresh_configuration() -> None:
    config = Config(roles={"implementer": RoleSpec(), "security": REVIEWER})
    assert applied(config, {}) is config
    once = applied(config, {"security": 1})
    assert once.roles["security"].provider == "codex"
    assert once.roles["implementer"] == RoleSpec(), "the other roles as they were"
    assert applied(config, {"security": 2}).roles["security"].env == ("CLAUDE_CONFIG_DIR",)
    assert applied(config, {"security": 5}).roles["security"].fallback == (), \
        "more failovers than fallbacks: the last one stays"
    assert applied(config, {"gone": 1}).roles == config.roles, "a role the config lost"

"""handoff.providers: the registry of the CLIs handoff drives, by the name a role's config
gives, and the clear refusal of a name it does not know."""

from __future__ import annotations

from pathlib import Path

import pytest

from handoff.errors import UsageError
from handoff.providers import PREFERENCE, REGISTRY, RoleSpec, get, known
from handoff.providers.claude import Claude
from handoff.providers.scripted import Scripted


def test_every_provider_is_known_by_its_own_name() -> None:
    assert set(REGISTRY) == {"claude", "codex", "gemini", "opencode", "command", "scripted"}
    assert all(known(name).name == name for name in REGISTRY)
    assert set(PREFERENCE) <= set(REGISTRY), "init prefers only what it can drive"


def test_a_role_gets_its_provider_bound_to_its_spec_and_state_folder(tmp_path: Path) -> None:
    spec = RoleSpec(provider="claude", model="opus")
    got = get(spec, tmp_path / "cli")
    assert isinstance(got, Claude) and got.spec is spec
    assert isinstance(get(RoleSpec()), Scripted), "a role that names none is scripted"


def test_an_unknown_provider_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(UsageError) as refused:
        known("copilot")
    assert refused.value.message == "unknown provider 'copilot'"
    assert refused.value.hint == ("known providers: claude, codex, gemini, opencode, command, "
                                  "scripted (set roles.<role>.provider in .handoff.yaml)")

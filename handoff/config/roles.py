"""The `roles:` key: the team a new ticket gets, one RoleSpec a role, each later file's roles
over the earlier ones; and what kind each role is (kind_of). A role is checked against its
provider as it is read, so a bad flag is said at load, not by an orchestrator in the background."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from handoff.config.values import passable, strings
from handoff.errors import UsageError
from handoff.providers import REGISTRY, Launch, Provider, RoleSpec, known
from handoff.providers.command import MARKERS
from handoff.role import IMPLEMENTER, PLANNER, Kind, check_name, kind_named

ROLES_HINT = ("e.g. roles: {implementer: {provider: codex}, reviewer: {provider: claude}, "
              "security: {provider: codex, kind: reviewer, focus: security}}")
#: the shipped reviewer specialities (roles/reviewer-<focus>.md)
FOCUSES = ("security",)
ROLE_KEYS = ("provider", "model", "args", "permission_mode", "env", "answer", "binary",
             "command", "markers", "backend", "kind", "focus", "contract", "fallback")
#: what a role is, not how its CLI runs: kept when a later file changes its provider
TEAM_KEYS = ("kind", "focus", "contract")


def read(source: str, value: Any, before: dict[str, RoleSpec]) -> dict[str, RoleSpec]:
    """roles: name → spec, over the roles of the files before; `name: null` takes a role off
    the team. A name that is not a kind says its kind (`kind:`, or `focus:` for a reviewer)."""
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'roles' must map a role to {{provider: NAME, …}}",
                         ROLES_HINT)
    # this file's roles in its own order (testers work in it), after those only earlier
    # files name
    out = {name: spec for name, spec in before.items() if name not in value}
    for name, spec in value.items():
        try:
            check_name(name)
        except UsageError as exc:
            raise UsageError(f"{source}: roles.{name!s:.40}: {exc.message}", exc.hint) from None
        if spec is None:
            if name == IMPLEMENTER:
                raise UsageError(f"{source}: roles.{name}: the implementer cannot be taken off "
                                 "the team")
            out.pop(name, None)
            continue
        if not isinstance(spec, dict):
            raise UsageError(f"{source}: roles.{name} must be a mapping, e.g. {{provider: claude}}"
                             " (or null to take it off the team)")
        out[name] = _role(source, name, spec, before.get(name, RoleSpec()))
    return out


def _role(source: str, role_name: str, spec: dict[str, Any], before: RoleSpec,
          fallback: bool = False) -> RoleSpec:
    """One role's spec over before; fallback: a fallback's (its role says what it is)."""
    where = f"{source}: roles.{role_name}"
    unknown = set(spec) - set(ROLE_KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {sorted(map(str, unknown))}",
                         f"a role knows: {', '.join(ROLE_KEYS)}")
    name = spec.get("provider", before.provider)
    if not isinstance(name, str) or name not in REGISTRY:
        raise UsageError(f"{where}.provider: unknown provider {name!r}",
                         f"known providers: {', '.join(REGISTRY)}")
    cls = known(name)
    # another provider in a later file starts the role afresh: flags for one CLI never
    # reach another (what the role is stays)
    fields_: dict[str, Any] = {k: getattr(before, k) for k in TEAM_KEYS}
    if name == before.provider:
        fields_.update({k: getattr(before, k) for k in ROLE_KEYS if k != "provider"})
    fields_["provider"] = name
    for key in ("model", "permission_mode", "binary", "backend", "kind", "focus", "contract"):
        if key in spec:
            if not isinstance(spec[key], str):
                raise UsageError(f"{where}.{key} must be a string")
            fields_[key] = spec[key]
    for key in ("args", "env", "answer", "command"):
        if key in spec:
            fields_[key] = strings(source, f"roles.{role_name}.{key}", spec[key])
    if "markers" in spec:
        fields_["markers"] = _markers(where, spec["markers"])
    if "fallback" in spec:
        fields_["fallback"] = _fallback(source, role_name, spec["fallback"])
    role = RoleSpec(**fields_)
    if not fallback:
        _check_kind(where, role_name, role)
    _check_role(where, cls(role), role)
    return role


def _fallback(source: str, role_name: str, value: Any) -> tuple[RoleSpec, ...]:
    """roles.<role>.fallback: the CLIs that take the role over in order when its quota is
    spent, each a role's provider keys (not its kind: the role stays what it is)."""
    where = f"{source}: roles.{role_name}.fallback"
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise UsageError(f"{where} must be a list of {{provider: NAME, …}}",
                         "e.g. fallback: [{provider: codex}, {provider: claude, env: "
                         "[CLAUDE_CONFIG_DIR]}]")
    found = []
    for i, item in enumerate(value):
        taken = set(item) & {"fallback", *TEAM_KEYS}
        if taken:
            raise UsageError(f"{where}[{i}]: {', '.join(sorted(taken))} belong to the role, not "
                             "to a fallback")
        found.append(_role(source, f"{role_name}.fallback[{i}]", item, RoleSpec(),
                           fallback=True))
    return tuple(found)


def kind_of(role_name: str, spec: RoleSpec) -> Kind:
    """The role's kind: as written, else what its name says, else a reviewer when it has a
    focus (a checked spec always has one of these)."""
    if spec.kind:
        return Kind(spec.kind)
    return kind_named(role_name) or Kind.REVIEWER


def _check_kind(where: str, role_name: str, role: RoleSpec) -> None:
    if role.kind and role.kind not in tuple(Kind):
        raise UsageError(f"{where}.kind must be one of {', '.join(Kind)}, not {role.kind!r:.40}")
    if not role.kind and kind_named(role_name) is None and not role.focus:
        raise UsageError(f"{where}: say what the role is: kind: reviewer (or tester)",
                         f"e.g. roles: {{{role_name}: {{provider: claude, kind: reviewer, "
                         "focus: security}}")
    kind = kind_of(role_name, role)
    if (role_name == IMPLEMENTER) != (kind is Kind.IMPLEMENTER):
        raise UsageError(f"{where}: the implementer is the role named {IMPLEMENTER!r}, and only "
                         "it", "give this role kind reviewer or tester")
    if (role_name == PLANNER) != (kind is Kind.PLANNER):
        raise UsageError(f"{where}: the planner is the role named {PLANNER!r}, and only it",
                         "give this role kind reviewer or tester")
    if role.focus and (kind is not Kind.REVIEWER or role.focus not in FOCUSES):
        raise UsageError(f"{where}.focus {role.focus!r:.40} is not a reviewer's shipped focus",
                         f"focus is for reviewers: {', '.join(FOCUSES)}; or contract: a file "
                         "of your own")
    if role.contract and (Path(role.contract).is_absolute() or ".." in Path(role.contract).parts):
        raise UsageError(f"{where}.contract must be a path inside the repository, not "
                         f"{role.contract!r:.60}", "e.g. contract: .handoff/api-reviewer.md")


def _check_role(where: str, provider: Provider, role: RoleSpec) -> None:
    if role.permission_mode and role.permission_mode not in provider.modes:
        raise UsageError(f"{where}.permission_mode {role.permission_mode!r} is not one of "
                         f"{', '.join(provider.modes)} for {role.provider}")
    for name in role.env:
        passable(f"{where}.env", name)
    if role.backend and role.backend not in provider.backends:
        raise UsageError(f"{where}.backend {role.backend!r} is not one of {role.provider}'s",
                         f"{role.provider}'s back-ends: {', '.join(provider.backends) or 'none'}"
                         " (without the key, the person's environment chooses)")
    dialogs = {d.name for d in provider.rules.dialogs if d.keys}
    for name in role.answer:
        if name not in dialogs:
            raise UsageError(f"{where}.answer: handoff cannot answer {name!r} for "
                             f"{role.provider}",
                             f"answerable screens: {', '.join(sorted(dialogs)) or 'none'}")
    if role.provider == "command" and not role.command:
        raise UsageError(f"{where}: provider 'command' needs command: [argv, …, \"{{message}}\"]")
    if role.command and role.provider != "command":
        raise UsageError(f"{where}.command is only for provider 'command'")
    if role.command:  # a bad placeholder is found now, not by an orchestrator in the background
        try:
            provider.argv(Launch(ticket="T", role="role", worktree=Path("/w"), brief=Path("/b")))
        except UsageError as exc:
            raise UsageError(f"{where}.command: {exc.message.split(': ', 1)[-1]}",
                             exc.hint) from None


def _markers(where: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise UsageError(f"{where}.markers must map {', '.join(MARKERS)} to text")
    unknown = set(value) - set(MARKERS)
    if unknown:
        raise UsageError(f"{where}.markers: unknown key(s) {sorted(unknown)}",
                         f"markers are {', '.join(MARKERS)}")
    for key in ("busy", "turn_ended"):
        if key in value:
            try:
                re.compile(value[key])
            except re.error as exc:
                raise UsageError(f"{where}.markers.{key} is not a valid regular expression: "
                                 f"{exc}") from None
    return dict(value)

"""The keys a configuration file may hold, one row each in KEYS: how its value is read, and
whether only the person's own file may set it. `apply` reads one file over what the defaults
and the files before it made; a new key is a field of Config and a row here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from handoff.config import roles, sections
from handoff.config.model import PEER_NICE, PLACEMENTS
from handoff.config.values import (
    notify_command,
    passable,
    port_range,
    seconds,
    strings,
    whole_number,
)
from handoff.errors import UsageError
from handoff.protocol.plan import command_line

MAX_PORTS = 32


@dataclass(frozen=True)
class Given:
    """One key as one file gives it."""

    #: the file, as every error names it
    source: str
    key: str
    value: Any
    #: what the defaults and the files before made of the key (roles and sandbox build on it)
    before: Any
    #: the person's own file ($HANDOFF_HOME/config.yaml), not a repository's
    personal: bool


Reader = Callable[[Given], Any]


@dataclass(frozen=True)
class Key:
    read: Reader
    #: about every ticket this machine runs: from the person's own file alone, never a
    #: repository's
    personal: bool = False


def _whole(minimum: int) -> Reader:
    return lambda given: whole_number(given.source, given.key, given.value, minimum)


def _seconds(given: Given) -> float:
    return seconds(given.source, given.key, given.value)


def _flag(given: Given) -> bool:
    if not isinstance(given.value, bool):
        raise UsageError(f"{given.source}: '{given.key}' is true or false, "
                         f"not {given.value!r:.40}")
    return given.value


def _post_create(given: Given) -> tuple[tuple[str, ...], ...]:
    if not isinstance(given.value, list):
        raise UsageError(f"{given.source}: 'post_create' must be a list of argv lists")
    return tuple(strings(given.source, f"post_create[{i}]", v, allow_empty=False)
                 for i, v in enumerate(given.value))


def _env_allow(given: Given) -> tuple[str, ...]:
    names = strings(given.source, given.key, given.value)
    for name in names:
        passable(f"{given.source}: env_allow", name)
    return names


def _ports(given: Given) -> int:
    ports = whole_number(given.source, given.key, given.value, minimum=0)
    if ports > MAX_PORTS:
        raise UsageError(f"{given.source}: 'ports' is at most {MAX_PORTS} a worktree, not "
                         f"{given.value}")
    return ports


def _niceness(given: Given) -> int:
    value = given.value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 19:
        return value
    raise UsageError(f"{given.source}: 'peer_nice' must be a niceness from 0 (peers compete "
                     f"with handoff and you) to 19 (they take only what is left), not "
                     f"{value!r:.40}", f"e.g. peer_nice: {PEER_NICE}")


def _placement(given: Given) -> str:
    if given.value not in PLACEMENTS:
        raise UsageError(f"{given.source}: 'placement' is one of {', '.join(PLACEMENTS)}, "
                         f"not {given.value!r:.40}")
    return str(given.value)


#: every field of Config, in its order (tests/unit/config/test_keys.py holds them to each other)
KEYS: dict[str, Key] = {
    "max_rounds": Key(_whole(1)),
    "max_gate_bounces": Key(_whole(1)),
    "max_relaunches": Key(_whole(0)),
    "gate_timeout": Key(_seconds),
    "test": Key(lambda given: command_line(given.source, given.key, given.value)),
    "base_tests": Key(_flag),
    "warm_reviewers": Key(_flag),
    "start_timeout": Key(_seconds),
    "stall_timeout": Key(_seconds),
    "turn_grace": Key(_seconds),
    "unrecognised_timeout": Key(_seconds),
    "api_patience": Key(_seconds),
    "setup_timeout": Key(_seconds),
    "roles": Key(lambda given: roles.read(given.source, given.value, given.before)),
    "share": Key(lambda given: sections.shares(given.source, given.value)),
    "post_create": Key(_post_create),
    "env_allow": Key(_env_allow),
    "protected": Key(lambda given: strings(given.source, given.key, given.value)),
    "sandbox": Key(lambda given: sections.sandbox(given.source, given.value, given.before,
                                                  given.personal)),
    "notify": Key(lambda given: notify_command(given.source, given.value)),
    "budget": Key(lambda given: sections.budget(given.source, given.value)),
    "scanners": Key(lambda given: sections.scanners(given.source, given.value)),
    "ports": Key(_ports),
    "port_range": Key(lambda given: port_range(given.source, given.value)),
    "max_parallel": Key(_whole(1), personal=True),
    "peer_nice": Key(_niceness, personal=True),
    "hosts": Key(lambda given: sections.hosts(given.source, given.value), personal=True),
    "placement": Key(_placement, personal=True),
}


def apply(base: dict[str, Any], data: Any, source: str, personal: bool = True) -> None:
    """Read one file's data (as YAML gave it) into base, key by key, over what base holds."""
    if data is None:
        return
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping of keys to values")
    for key, value in data.items():
        if key not in KEYS:
            raise UsageError(
                f"{source}: unknown key '{key}'", f"known keys: {', '.join(sorted(KEYS))}"
            )
        if KEYS[key].personal and not personal:
            raise UsageError(f"{source}: '{key}' is this machine's, not a repository's: "
                             "it is about every ticket this machine runs",
                             "put it in $HANDOFF_HOME/config.yaml (handoff doctor names "
                             "that file)")
        base[key] = KEYS[key].read(Given(source, key, value, base[key], personal))

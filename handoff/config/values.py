"""The plain values of a configuration file, each checked with an error that names the file and
the key: whole numbers, seconds, lists of strings, a command, a port range, the names of
environment variables a peer may see. Nothing here knows the Config (handoff.config.model)."""

from __future__ import annotations

from typing import Any

from handoff.errors import UsageError
from handoff.providers import markers

MAX_SECONDS = 30 * 24 * 3600


def whole_number(source: str, key: str, value: Any, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{source}: '{key}' must be a whole number ≥ {minimum}, not {value!r}")
    return value


def seconds(source: str, key: str, value: Any) -> float:
    """A finite, positive number of seconds: .nan compares false to everything and .inf never
    ends, and every wait must have a bound."""
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= MAX_SECONDS:
        return float(value)
    raise UsageError(f"{source}: '{key}' must be a positive number of seconds up to "
                     f"{MAX_SECONDS} (30 days), not {value!r:.40}", "e.g. 900")


def strings(source: str, key: str, value: Any, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{source}: '{key}' must be a list of non-empty strings")
    if not value and not allow_empty:
        raise UsageError(f"{source}: '{key}' is an empty command")
    return tuple(value)


def passable(where: str, name: str) -> None:
    """A listed variable may reach a peer: it is no coding CLI's session marker."""
    why = markers.marker(name)
    if why is not None:
        raise UsageError(f"{where}: {name} never passes to a peer: {why}", markers.WHY)


def notify_command(source: str, value: Any) -> tuple[str, ...]:
    """The notify command: an argv run without a shell (a string would need one)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{source}: 'notify' must be a command as a list of non-empty strings, "
                         f"not {value!r:.60}",
                         'e.g. notify: ["notify-me", "--json"] (it reads the event as JSON on '
                         "its stdin)")
    return tuple(value)


def port_range(source: str, value: Any) -> tuple[int, int]:
    """port_range: LOW-HIGH (a string) or [LOW, HIGH], unprivileged ports, LOW ≤ HIGH."""
    hint = "e.g. port_range: 20000-29999"
    parts = value.split("-") if isinstance(value, str) else value
    if not isinstance(parts, list) or len(parts) != 2:
        raise UsageError(f"{source}: 'port_range' must be LOW-HIGH, not {value!r:.40}", hint)
    try:
        low, high = (int(str(p).strip()) for p in parts)
    except ValueError:
        raise UsageError(f"{source}: 'port_range' must be two port numbers, not "
                         f"{value!r:.40}", hint) from None
    if not 1024 <= low <= high <= 65535:
        raise UsageError(f"{source}: 'port_range' {low}-{high} is not a range of unprivileged "
                         "ports (1024-65535, low first)", hint)
    return low, high

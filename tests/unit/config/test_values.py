"""handoff.config.values: the plain values of a configuration file, each refused with a message
that names the file and the key."""

from __future__ import annotations

from typing import Any

import pytest

from handoff.config.values import (
    MAX_SECONDS,
    notify_command,
    passable,
    port_range,
    seconds,
    strings,
    whole_number,
)
from handoff.errors import UsageError
from handoff.providers import markers


def test_a_whole_number_is_an_int_at_least_its_minimum_and_never_a_bool() -> None:
    assert whole_number("f.yaml", "ports", 0, minimum=0) == 0
    assert whole_number("f.yaml", "max_rounds", 7) == 7
    for bad in (0, -1, True, 2.5, "3", None):
        with pytest.raises(UsageError) as caught:
            whole_number("f.yaml", "max_rounds", bad)
        assert caught.value.message == f"f.yaml: 'max_rounds' must be a whole number ≥ 1, not {bad!r}"


def test_seconds_are_finite_positive_and_at_most_thirty_days() -> None:
    assert seconds("f.yaml", "turn_grace", 2.5) == 2.5
    assert seconds("f.yaml", "gate_timeout", MAX_SECONDS) == float(MAX_SECONDS) == 2592000.0
    for bad in (0, -1, float("nan"), float("inf"), MAX_SECONDS + 1, True, "5"):
        with pytest.raises(UsageError) as caught:
            seconds("f.yaml", "gate_timeout", bad)
        assert caught.value.message.startswith("f.yaml: 'gate_timeout' must be a positive number "
                                               "of seconds up to 2592000 (30 days), not ")
        assert caught.value.hint == "e.g. 900"


@pytest.mark.parametrize("bad", ["a b", ["a", ""], ["a", 3], None])
def test_strings_are_a_list_of_non_empty_strings(bad: Any) -> None:
    assert strings("f.yaml", "env_allow", ["A", "B"]) == ("A", "B")
    assert strings("f.yaml", "env_allow", []) == ()
    with pytest.raises(UsageError, match=r"^f.yaml: 'env_allow' must be a list of non-empty "
                                         r"strings$"):
        strings("f.yaml", "env_allow", bad)


def test_a_command_is_not_empty() -> None:
    with pytest.raises(UsageError, match=r"^f.yaml: 'post_create\[0\]' is an empty command$"):
        strings("f.yaml", "post_create[0]", [], allow_empty=False)


def test_a_coding_clis_session_marker_never_passes_to_a_peer() -> None:
    passable("f.yaml: env_allow", "HTTP_PROXY")
    with pytest.raises(UsageError) as caught:
        passable("f.yaml: env_allow", "CODEX_THREAD_ID")
    assert caught.value.message.startswith("f.yaml: env_allow: CODEX_THREAD_ID never passes to "
                                           "a peer: ")
    assert caught.value.hint == markers.WHY


def test_notify_is_an_argv_run_without_a_shell() -> None:
    assert notify_command("f.yaml", ["notify-me", "--json"]) == ("notify-me", "--json")
    for bad in ("notify-me --json", ["a", ""], [3]):
        with pytest.raises(UsageError, match="'notify' must be a command as a list") as caught:
            notify_command("f.yaml", bad)
        assert "stdin" in (caught.value.hint or "")


def test_a_port_range_is_of_unprivileged_ports_low_first() -> None:
    assert port_range("f.yaml", "20000-29999") == (20000, 29999)
    assert port_range("f.yaml", " 2000 - 2000 ") == (2000, 2000)
    assert port_range("f.yaml", [1024, 65535]) == (1024, 65535)
    said = {"1-2": "'port_range' 1-2 is not a range of unprivileged ports",
            "3000-2000": "'port_range' 3000-2000 is not a range",
            "a-b": "'port_range' must be two port numbers",
            "1-2-3": "'port_range' must be LOW-HIGH", "3": "'port_range' must be LOW-HIGH"}
    for bad, message in said.items():
        with pytest.raises(UsageError, match=message) as caught:
            port_range("f.yaml", bad)
        assert caught.value.hint == "e.g. port_range: 20000-29999"

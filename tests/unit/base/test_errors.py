"""handoff.errors: each expected failure carries its message, its hint and its documented exit
code, and a person sees one message for it."""

from __future__ import annotations

import pytest

from handoff import errors
from handoff.errors import (
    Busy,
    ExternalFailure,
    HandoffError,
    MissingTool,
    NotFound,
    NotMerged,
    Tampered,
    UsageError,
    WorkAtRisk,
    describe,
)


@pytest.mark.parametrize(("kind", "code"), [
    (HandoffError, 1), (UsageError, 2), (NotFound, 3), (Busy, 4), (WorkAtRisk, 5),
    (MissingTool, 6), (NotMerged, 7), (ExternalFailure, 1), (Tampered, 1)])
def test_each_failure_has_its_documented_exit_code(kind: type[HandoffError], code: int) -> None:
    raised = kind("what", "how")
    assert raised.exit_code == code
    assert isinstance(raised, HandoffError) and str(raised) == "what"
    assert (raised.message, raised.hint) == ("what", "how")


def test_tampered_is_an_external_failure() -> None:
    """Whoever catches git's or tmux's failures catches a tampered file too."""
    assert issubclass(Tampered, ExternalFailure)


def test_the_exit_codes_mean_one_thing_each() -> None:
    codes = {name: value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert len(set(codes.values())) == len(codes), codes
    assert codes["EXIT_OK"] == 0 and codes["EXIT_INTERRUPTED"] == 128 + 2  # SIGINT's


def test_a_person_sees_the_message_then_the_hint() -> None:
    assert describe(NotFound("no ticket T-1")) == "handoff: error: no ticket T-1"
    assert describe(Busy("held", "stop it first")) == ("handoff: error: held\n"
                                                      "  hint: stop it first")

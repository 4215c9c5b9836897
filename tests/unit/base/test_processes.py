"""handoff.processes: what handoff knows of live processes, read through psutil (and the two
Linux facts read from /proc, each tested beside psutil's). Real processes, started here."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from handoff import processes
from handoff.processes import Identity, ProcIdentity

BOTH = pytest.mark.parametrize("identity", [ProcIdentity(), Identity()], ids=lambda i: i.name)


def uptime() -> float:
    return float(Path("/proc/uptime").read_text().split()[0])


@BOTH
def test_the_boot_is_the_same_for_every_reader_of_this_boot(identity: Identity) -> None:
    said = identity.boot()
    assert said and identity.boot() == said


def test_the_psutil_boot_is_when_the_machine_started() -> None:
    assert abs(float(Identity().boot()) - (time.time() - uptime())) < 3


def test_the_platform_uses_the_proc_identity_on_linux() -> None:
    assert isinstance(processes.IDENTITY, ProcIdentity)
    assert processes.start_time(os.getpid()) == ProcIdentity().start(os.getpid())

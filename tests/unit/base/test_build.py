"""handoff.build: the version handoff reports and the digest that tells two installations of
one version apart (a host runs the same code as this machine or none of its tickets)."""

from __future__ import annotations

from importlib.metadata import version as installed

import handoff
from handoff import build


def test_the_version_is_the_installed_distributions() -> None:
    assert build.version() == installed(build.DISTRIBUTION) == handoff.__version__

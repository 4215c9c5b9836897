"""The options many commands share, spelled once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

RepoOpt = Annotated[Path | None, typer.Option("--repo", help="The repository (default: here).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output (docs/cli.md).")]

"""`handoff verify`: a passed ticket's evidence bundle checked again, by anyone who has it and
its signer's public key (the core: handoff.operations.verifying)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from handoff.cli import output
from handoff.cli.options import RepoOpt


def verify(
    bundle: Annotated[Path, typer.Argument(metavar="BUNDLE", show_default=False,
                                           help="A passed ticket's evidence-<commit>.tar.")],
    rerun: Annotated[bool, typer.Option("--rerun", help="Run its gate again in a fresh, fenced "
                                        "checkout of the commit, and compare.")] = False,
    key: Annotated[Path | None, typer.Option(
        "--key", metavar="FILE", help="The signer's public key (their keys/evidence.pub); "
        "default: this handoff home's own.", show_default=False)] = None,
    repo: RepoOpt = None,
) -> None:
    """Check a passed ticket's evidence bundle: its signature, every file's hash, its change
    against the repository, and (--rerun) its gate run again."""
    from handoff.operations import verifying
    from handoff.record.store import state_home

    output.show(verifying.verify(state_home(), bundle, repo, key, rerun))

"""handoff.providers.base: what a role's launch is, and what every provider shares."""

from __future__ import annotations

from pathlib import Path

from handoff.providers import RoleSpec, get
from tests.unit.providers.test_base import fake_cli


def test_a_clis_version_is_the_first_release_number_it_prints(tmp_path: Path) -> None:
    cli = fake_cli(tmp_path, 'echo "warming up" >&2; echo "Claude Code 2.1.300 (build 7)"')
    assert get(RoleSpec(provider="claude", binary=str(cli))).version() == "2.1.300"
    silent = fake_cli(tmp_path, "exit 0")
    assert get(RoleSpec(provider="claude", binary=str(silent))).version() is None


def test_doctor_names_the_launch_flags_a_cli_refuses(tmp_path: Path) -> None:
    """The provider's own launch flags, run with --help: an old CLI that lacks one says so."""
    refuses = fake_cli(tmp_path, 'echo "error: unexpected argument" >&2; exit 2')
    problem = get(RoleSpec(provider="codex", binary=str(refuses))).flags_problem()
    assert problem is not None and "exited 2: error: unexpected argument" in problem
    assert "--no-daemon" in problem and "--help` exited" in problem
    accepts = fake_cli(tmp_path, 'echo "$@" > "$(dirname "$0")/args"')
    assert get(RoleSpec(provider="codex", binary=str(accepts))).flags_problem() is None
    assert (tmp_path / "args").read_text().split()[-1] == "--help"
    mine = get(RoleSpec(provider="command", command=(str(refuses), "{message}")))
    assert mine.flags_problem() is None, "a person's own command's flags are not probed"

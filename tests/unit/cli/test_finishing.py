"""handoff.cli.finishing: what finish refuses before it merges anything, in this process
(tests/cli_here.py: nothing here asks git). A ticket on a host is finished on its own (a train
merges tickets of this machine), and never pushed from here; the merges themselves are
tests/integration/operations/test_finish.py's, and a hosted finish over a real sshd
tests/integration/operations/test_hosts.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from handoff.record import placed
from handoff.record.placed import Placement
from tests.cli_here import handoff_here
from tests.harness import assert_clean_error


@pytest.fixture
def hosted(handoff_home: Path, tmp_path: Path) -> str:
    """H-1 placed on host build1, whose ssh is never run: each case is refused before."""
    handoff_home.mkdir(mode=0o700, exist_ok=True)
    (handoff_home / "config.yaml").write_text(yaml.safe_dump({"hosts": {"build1": {
        "ssh": ["ssh", "-p", "1", "nobody@build1.invalid"]}}}), encoding="utf-8")
    placed.save(handoff_home, Placement(ticket="H-1", host="build1", repo=str(tmp_path / "repo"),
                                        mirror="/there/repo-1", base="main",
                                        base_commit="0" * 40, base_branch="main"))
    return "H-1"


def test_remote_says_where_push_pushes(tmp_path: Path) -> None:
    assert_clean_error(handoff_here("finish", "T-1", "--remote", "origin", cwd=tmp_path), 2,
                       "--remote says where --push pushes", "add --push (or --pr)")


def test_a_ticket_on_a_host_is_no_part_of_a_train(tmp_path: Path, hosted: str) -> None:
    done = handoff_here("finish", "T-1", hosted, cwd=tmp_path)
    assert_clean_error(done, 2, f"{hosted} run(s) on a host: a train merges tickets of this "
                       "machine only", f"'handoff finish {hosted}'")


@pytest.mark.parametrize("flag", ["--push", "--pr"])
def test_a_ticket_on_a_host_is_pushed_from_there(tmp_path: Path, hosted: str, flag: str) -> None:
    assert_clean_error(handoff_here("finish", hosted, flag, cwd=tmp_path), 2,
                       f"{hosted} runs on a host: push its branch from there",
                       f"'handoff finish {hosted}' merges it here")


def test_squash_and_merge_together_are_refused_naming_both(tmp_path: Path) -> None:
    assert_clean_error(handoff_here("finish", "T-1", "--merge", "--squash", cwd=tmp_path), 2,
                       "--squash and --merge are two ways to merge: give one")

"""handoff.cli.elsewhere's OnItsHost: a command about a ticket on a host goes there as the
person typed it, but --repo (a path of this machine), read as click reads the words. Here the
host's `ssh` is a stand-in that says what it was asked to run; the whole round trip over a
real sshd is tests/integration/operations/test_hosts.py's."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import yaml

from handoff.record import placed
from handoff.record.placed import Placement
from tests.harness import handoff

#: an `ssh` that runs nothing: it writes the words it was given to asked.json beside it, says
#: "done there" and exits with the status its destination names (`exit-N`)
STAND_IN = """import json, pathlib, sys
pathlib.Path(__file__).with_name("asked.json").write_text(json.dumps(sys.argv[1:]))
print("done there")
sys.exit(int(sys.argv[-3].removeprefix("exit-")))
"""


def placed_on_a_stand_in(home: Path, tmp_path: Path, status: int) -> Path:
    """T-1 placed on host build1, whose ssh is the stand-in; where it writes what it was asked."""
    script = tmp_path / "ssh"
    script.write_text(f"#!{sys.executable}\n{STAND_IN}", encoding="utf-8")
    script.chmod(0o700)
    home.mkdir(mode=0o700, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"hosts": {"build1": {
        "ssh": [str(script), f"exit-{status}"]}}}), encoding="utf-8")
    placed.save(home, Placement(ticket="T-1", host="build1", repo=str(tmp_path / "repo"),
                                mirror="/there/mirrors/repo-1", base="main",
                                base_commit="0" * 40, base_branch="main"))
    return tmp_path / "asked.json"


def test_a_ticket_on_a_host_is_handed_there_as_typed_with_its_mirror(
        handoff_home: Path, tmp_path: Path) -> None:
    asked = placed_on_a_stand_in(handoff_home, tmp_path, status=0)
    done = handoff("answer", "--repo", str(tmp_path), "T-1", "--", "-x: use the old API")
    assert (done.returncode, done.stdout) == (0, "done there\n"), done.stderr
    remote = json.loads(asked.read_text(encoding="utf-8"))[-1]  # after `--`: for the host
    assert shlex.split(remote) == ["handoff", "answer", "--repo", "/there/mirrors/repo-1",
                                   "T-1", "--", "-x: use the old API"]


def test_the_hosts_exit_status_is_the_commands(handoff_home: Path, tmp_path: Path) -> None:
    placed_on_a_stand_in(handoff_home, tmp_path, status=3)
    done = handoff("stop", "T-1")
    assert done.returncode == 3 and done.stderr == "done there\n", done


def test_resume_all_and_foreground_run_here(handoff_home: Path, tmp_path: Path,
                                            repo: Path) -> None:
    """--foreground would run the orchestrator over ssh: it runs here, where T-1 is not."""
    asked = placed_on_a_stand_in(handoff_home, tmp_path, status=0)
    done = handoff("resume", "T-1", "--foreground", cwd=repo)
    assert done.returncode == 3 and "no ticket 'T-1'" in done.stderr, done
    assert not asked.exists(), "nothing was asked of the host"

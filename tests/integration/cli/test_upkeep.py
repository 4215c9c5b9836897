"""handoff.cli.upkeep: the commands about handoff itself. init writes its config once; doctor
outside a repository checks the machine and says so; gc with nothing left says so."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness import assert_clean_error, handoff


def test_init_writes_config_once(repo: Path) -> None:
    first = handoff("init", cwd=repo)
    assert first.returncode == 0 and (repo / ".handoff.yaml").is_file()
    (repo / ".handoff.yaml").write_text("max_rounds: 2\n")
    second = handoff("init", cwd=repo)
    assert second.returncode == 0 and "leaving it alone" in second.stdout
    assert (repo / ".handoff.yaml").read_text() == "max_rounds: 2\n"


def test_doctor_outside_a_repository_checks_the_machine_and_keeps_its_json_one_document(
        tmp_path: Path) -> None:
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    done = handoff("doctor", "--json", cwd=outside)
    checks = json.loads(done.stdout)
    assert checks and {"level", "what", "detail", "fix"} == set(checks[0])
    assert "not in a git repository: repo checks skipped" in done.stderr
    failed = any(check["level"] == "FAIL" for check in checks)
    assert done.returncode == (1 if failed else 0), done.stderr
    assert_clean_error(handoff("doctor", "--repo", str(outside)), 2,
                       "not inside a git repository")


def test_gc_with_nothing_left_behind_says_so(repo: Path) -> None:
    done = handoff("gc", cwd=repo)
    assert (done.returncode, done.stdout) == (0, "gc: nothing to clean up\n"), done.stderr
    listed = handoff("gc", "--dry-run", "--json", cwd=repo)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []

"""handoff.loop.evidence: a passed ticket's evidence bundle, written at `passed` and signed with
the home's key, holds what decided it and verifies as made (tampering with it:
tests/integration/operations/test_verifying.py)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.conftest import git
from tests.harness import ADD_ONLY, handoff
from tests.integration.operations.test_verifying import passed

__all__ = ["passed"]  # the fixture: a ticket run to passed, its bundle


def test_a_passed_tickets_bundle_holds_what_decided_it_and_verifies(
        repo: Path, handoff_home: Path, passed: Path) -> None:
    with tarfile.open(passed) as tar:
        names = tar.getnames()
        manifest = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
    assert {"manifest.json", "manifest.sig", "signer.pub", "plan.md", "change.diff",
            "gate-1.log", "review-report-1.md", "final-report.md"} <= set(names), names
    commit = git(repo, "rev-parse", "handoff/E-1")
    assert manifest["commit"] == commit and manifest["ticket"] == "E-1"
    assert manifest["gate"] == {"command": ADD_ONLY, "result": "pass"}
    assert manifest["verdicts"] == {"reviewer": "pass"}
    assert manifest["sandbox"].startswith("bubblewrap")
    key = (handoff_home / "keys" / "evidence.key")
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    done = handoff("verify", str(passed), cwd=repo)
    assert done.returncode == 0, done.stderr
    assert f"verified: E-1 passed at {commit[:10]}" in done.stdout
    assert "files: " in done.stdout and f"holds {commit[:10]}" in done.stdout



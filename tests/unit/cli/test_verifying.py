"""handoff.cli.verifying: `handoff verify` on what is no bundle says so in one line (in this
process: tests/cli_here.py); bundles themselves: tests/integration/operations/test_verifying.py."""

from __future__ import annotations

from pathlib import Path

from tests.cli_here import handoff_here
from tests.harness import assert_clean_error


def test_a_file_that_is_not_a_bundle_or_not_there_is_named(tmp_path: Path) -> None:
    assert_clean_error(handoff_here("verify", str(tmp_path / "none.tar")), 2,
                       "cannot read the bundle", "evidence-<commit>.tar")
    junk = tmp_path / "junk.tar"
    junk.write_text("not a tar at all\n" * 100)
    assert_clean_error(handoff_here("verify", str(junk)), 2, "is not an evidence bundle")
    link = tmp_path / "link.tar"
    link.symlink_to(junk)
    assert_clean_error(handoff_here("verify", str(link)), 2, "cannot read the bundle")

"""handoff.build: the version handoff reports and the digest that tells two installations of
one version apart (a host runs the same code as this machine or none of its tickets)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from handoff import build


def digest_of(package_parent: Path) -> str:
    """code_digest() as a fresh interpreter computes it for the handoff in package_parent."""
    done = subprocess.run([sys.executable, "-c",
                           "from handoff import build; print(build.code_digest())"],
                          cwd=package_parent, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_digest_follows_the_code_and_nothing_else(tmp_path: Path) -> None:
    """A copy of the package digests as the package does; bytecode beside it changes nothing;
    one edited line anywhere in it changes the digest."""
    here = build.code_digest()
    assert len(here) == 16 and int(here, 16) >= 0
    copy = tmp_path / "handoff"
    shutil.copytree(Path(build.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    assert digest_of(tmp_path) == here
    (copy / "__pycache__" / "stale.cpython-311.pyc").parent.mkdir(exist_ok=True)
    (copy / "__pycache__" / "stale.cpython-311.pyc").write_bytes(b"\0" * 8)
    (copy / "loop" / "left.pyc").write_bytes(b"\0" * 8)
    assert digest_of(tmp_path) == here, "bytecode is not code"
    errors = copy / "errors.py"
    errors.write_text(errors.read_text() + "# edited\n")
    assert digest_of(tmp_path) != here
    errors.write_text(errors.read_text().removesuffix("# edited\n"))
    (copy / "notes.md").write_text("any file of the package counts, not only .py\n")
    assert digest_of(tmp_path) != here

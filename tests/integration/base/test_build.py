"""handoff.build: the version handoff reports and the digest that tells two installations of
one version apart (a host runs the same code as this machine or none of its tickets)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from handoff import build
from tests.paths import ROOT


def digest_of(installed: Path) -> str:
    """code_digest() as a fresh interpreter computes it for the handoff installed in installed
    (no site: this checkout's editable install is not seen)."""
    done = subprocess.run([sys.executable, "-S", "-c",
                           "import handoff, sys; from handoff import build; "
                           "assert handoff.__file__.startswith(sys.argv[1]), handoff.__file__; "
                           "print(build.code_digest())", str(installed)],
                          cwd=installed.parent, env={"PYTHONPATH": str(installed)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_wheel_of_this_checkout_digests_as_the_checkout_and_its_edits_do_not(
        tmp_path: Path) -> None:
    """The same commit installed from its wheel (roles and hooks inside the package) and
    editable here (they sit beside it, in roles/ and hooks/) is the same code; bytecode and a
    stray file are not code; an edited module, role or hook is other code."""
    here = build.code_digest()
    assert len(here) == 16 and int(here, 16) >= 0
    source, wheel = tmp_path / "source", tmp_path / "site"
    source.mkdir()
    for part in ("pyproject.toml", "README.md"):  # a copy: the build writes beside its source
        shutil.copy(ROOT / part, source / part)
    for part in ("handoff", "roles", "hooks"):
        shutil.copytree(ROOT / part, source / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                           "--no-build-isolation", "--no-index", "--target", str(wheel),
                           str(source)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    package = wheel / "handoff"
    assert (package / "roles" / "reviewer.md").is_file(), "the wheel ships its roles inside"
    assert digest_of(wheel) == here, "the wheel of this checkout is this checkout's code"
    (package / "loop" / "left.pyc").write_bytes(b"\0" * 8)
    (package / "notes.md").write_text("an editor's or a build's file\n")
    (package / "hooks" / "hooks.json").write_text("{}\n")  # the plugin's: no wheel ships it
    assert digest_of(wheel) == here, "bytecode and stray files are not code"
    for edited in (package / "errors.py", package / "roles" / "reviewer.md",
                   package / "hooks" / "peer-signal"):
        original = edited.read_bytes()
        edited.write_bytes(original + b"\n# edited\n")
        assert digest_of(wheel) != here, f"{edited.relative_to(wheel)} edited is other code"
        edited.write_bytes(original)
    assert digest_of(wheel) == here

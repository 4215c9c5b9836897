"""The built wheel, not the source tree: does it ship its data files and find them at run time?"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.paths import ROOT

BUILD_TIMEOUT = 300.0
DATA_FILES = ("handoff/roles/implementer.md", "handoff/roles/reviewer.md",
              "handoff/hooks/post-create.example", "handoff/hooks/opencode-signal.js")
# What a wheel build writes or reads that is no part of the source.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__",
                                    ".mypy_cache", ".ruff_cache", ".pytest_cache", ".worktrees")


def build_requirements_installed() -> bool:
    """pyproject's [build-system] requires (setuptools>=68, wheel) in this interpreter."""
    try:
        major = int(version("setuptools").split(".")[0])
    except Exception:
        return False
    return major >= 68 and importlib.util.find_spec("wheel") is not None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a clean copy of the project (a stale build/ in the work tree could
    otherwise leak files into it), with this venv's interpreter.

    --no-build-isolation needs the build requirements in the venv; the test extras do not
    install them, so without them pip builds in its usual isolated environment instead.
    """
    base = tmp_path_factory.mktemp("wheel")
    source, out = base / "source", base / "dist"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    isolation = ["--no-build-isolation"] if build_requirements_installed() else []
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check",
            *isolation, "-w", str(out), str(source)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
                              stdin=subprocess.DEVNULL, cwd=base)
    except subprocess.TimeoutExpired:
        pytest.fail(f"pip wheel did not finish within {BUILD_TIMEOUT:g}s: {' '.join(argv)}")
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"
    wheels = list(out.glob("*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.fixture(scope="module")
def unpacked(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("unpacked")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def run_from_wheel(unpacked: Path, code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """python -c code seeing only the unpacked wheel plus the venv's dependencies.

    -S keeps site from running the venv's .pth files (the editable install would point
    `handoff` back at the source tree); PYTHONPATH is then all of sys.path beyond the stdlib.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = os.pathsep.join([str(unpacked), sysconfig.get_paths()["purelib"]])
    return subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=cwd, env=env, stdin=subprocess.DEVNULL)


def test_wheel_ships_the_role_and_hook_data(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name in DATA_FILES:
            assert name in names, f"{name} is missing from {wheel.name}"
        assert archive.read("handoff/roles/implementer.md") == (ROOT / "roles/implementer.md").read_bytes()
        assert archive.read("handoff/roles/reviewer.md") == (ROOT / "roles/reviewer.md").read_bytes()
        assert (archive.read("handoff/hooks/post-create.example")
                == (ROOT / "hooks/post-create.example").read_bytes())


def test_wheel_declares_the_handoff_command(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [entry_points] = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = archive.read(entry_points).decode()
    assert "handoff = handoff.cli.entry:main" in [line.strip() for line in text.splitlines()]


def test_installed_wheel_finds_its_role_contracts_and_hook_script(unpacked: Path,
                                                                   tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import json, handoff, handoff.protocol.contracts as c, handoff.providers.signals as s\n"
        "print(json.dumps({'file': handoff.__file__,\n"
        "                  'implementer': c.shipped('implementer'),\n"
        "                  'reviewer': c.shipped('reviewer'),\n"
        "                  'engineering': c.shipped('engineering'),\n"
        "                  'signal': str(s.script())}))\n"
    )

    done = run_from_wheel(unpacked, code, elsewhere)

    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["file"]).resolve().is_relative_to(unpacked.resolve())
    for name in ("implementer", "reviewer", "engineering"):
        assert seen[name].strip()
        assert seen[name] == (ROOT / "roles" / f"{name}.md").read_text(encoding="utf-8")
    signal = Path(seen["signal"])
    assert signal.resolve().is_relative_to(unpacked.resolve())
    assert signal.read_bytes() == (ROOT / "hooks" / "peer-signal").read_bytes()


def test_wheel_ships_every_module_of_the_package(wheel: Path) -> None:
    expected = {f"handoff/{p.relative_to(ROOT / 'handoff').as_posix()}"
                for p in (ROOT / "handoff").rglob("*.py") if "__pycache__" not in p.parts}
    assert "handoff/providers/__init__.py" in expected

    with zipfile.ZipFile(wheel) as archive:
        missing = expected - set(archive.namelist())

    assert not missing, f"not in {wheel.name}: {sorted(missing)}"


def test_installed_wheel_imports_its_command(unpacked: Path, tmp_path: Path) -> None:
    done = run_from_wheel(unpacked, "import handoff.cli.app, handoff.machinery.peers\n"
                                    "assert callable(handoff.cli.app.main)\n", tmp_path)

    assert done.returncode == 0, done.stderr

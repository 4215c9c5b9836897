"""The venv the start-up figures are measured in: handoff installed with its runtime
dependencies only (no test extras), as a person installs it.

It is made once per pyproject.toml (its hash names the folder, under
~/.cache/handoff-bench/) with `python -m venv` and `pip install` of a clean copy of the
checkout, and handoff alone is installed again whenever the checkout's source changed since.
The copy keeps pip's build from writing build/ and *.egg-info into the work tree.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.machine import CHECKOUT
from bench.sandbox import BenchError

#: what pip needs to build handoff: the project file and the packages' folders
SOURCE = ("pyproject.toml", "README.md", "LICENSE", "handoff", "roles", "hooks")
NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
MARK = "handoff-source.sha256"
PIP_TIMEOUT = 900


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "handoff-bench"


def _digest(paths: list[Path]) -> str:
    hasher = hashlib.sha256()
    for path in paths:
        hasher.update(str(path.relative_to(CHECKOUT)).encode() + b"\0" + path.read_bytes())
    return hasher.hexdigest()


def source_files() -> list[Path]:
    found: list[Path] = []
    for name in SOURCE:
        path = CHECKOUT / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return sorted(found)


def _pip(python: Path, *args: str, source: Path = CHECKOUT) -> None:
    with tempfile.TemporaryDirectory(prefix="hb-source-") as scratch:
        copy = Path(scratch) / "handoff"
        copy.mkdir()
        for name in SOURCE:
            path = source / name
            if path.is_dir():
                shutil.copytree(path, copy / name, ignore=NOT_SOURCE)
            elif path.is_file():
                shutil.copy2(path, copy / name)
        argv = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                *args, str(copy)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise BenchError(f"pip install did not finish within {PIP_TIMEOUT} s") from None
    if done.returncode != 0:
        raise BenchError(f"pip install into {python.parent.parent} failed: "
                         f"{(done.stderr or done.stdout).strip()[-600:]}")


def runtime_python(log: bool = True) -> Path:
    """The cached venv's interpreter, made or brought up to date with the checkout first."""
    folder = cache_dir() / f"venv-{_digest([CHECKOUT / 'pyproject.toml'])[:12]}"
    python = folder / "bin" / "python"
    source = _digest(source_files())
    mark = folder / MARK
    if python.exists() and mark.exists() and mark.read_text(encoding="utf-8") == source:
        return python
    fresh = not python.exists()
    if fresh:
        if log:
            print(f"bench: making the runtime-only venv {folder} (once per pyproject.toml) …",
                  file=sys.stderr, flush=True)
        # one venv at a time: those of earlier pyproject.toml files are of no more use
        for old in folder.parent.glob("venv-*"):
            shutil.rmtree(old, ignore_errors=True)
        make_venv(folder)
        _pip(python)
    else:
        if log:
            print(f"bench: installing this checkout into {folder} …", file=sys.stderr, flush=True)
        _pip(python, "--no-deps", "--force-reinstall")
    mark.write_text(source, encoding="utf-8")
    return python


def make_venv(folder: Path) -> None:
    """An empty venv at folder, made with the interpreter running the bench."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(folder)], capture_output=True,
                          text=True, timeout=300, check=False)
    if made.returncode != 0:
        raise BenchError(f"python -m venv {folder} failed: {made.stderr.strip()[-400:]}")


def installed(folder: Path, source: Path, mark: str) -> Path:
    """The interpreter of a venv at folder holding source (a checkout's files) installed with
    its runtime dependencies, made once: mark names what it holds (a commit)."""
    python = folder / "bin" / "python"
    if holds(folder, mark):
        return python
    shutil.rmtree(folder, ignore_errors=True)
    make_venv(folder)
    _pip(python, source=source)
    (folder / MARK).write_text(mark, encoding="utf-8")
    return python


def holds(folder: Path, mark: str) -> bool:
    """The venv at folder is made and holds what mark names."""
    said = folder / MARK
    return (folder / "bin" / "python").exists() and said.exists() and \
        said.read_text(encoding="utf-8") == mark

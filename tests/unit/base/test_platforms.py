"""handoff.platforms: where handoff runs, what is weaker where it is not tested, and native
Windows refused before anything it lacks is imported."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from handoff import platforms
from handoff.operations.doctor import platform_check
from tests.conftest import PYTHON
from tests.harness import handoff
from tests.paths import ROOT


def test_linux_is_the_tested_platform() -> None:
    linux = platforms.of("linux", "6.8.0-45-generic", "x86_64")
    assert (linux.name, linux.tested, linux.weaker, linux.refused) == ("Linux", True, (), "")
    assert platform_check(linux).level == "OK"


@pytest.mark.parametrize(("release", "name"), [
    ("5.15.153.1-microsoft-standard-WSL2", "WSL2"), ("4.4.0-19041-Microsoft", "WSL1")])
def test_wsl_is_told_apart_by_its_kernel_release(release: str, name: str) -> None:
    found = platforms.of("linux", release, "x86_64")
    assert found.name == name and not found.tested and not found.refused
    check = platform_check(found)
    if name == "WSL2":  # a real Linux kernel: the same paths, said not tested
        assert check.level == "OK" and "not tested here" in check.detail
    else:
        assert check.level == "WARN" and "built for WSL2" in check.detail


def test_macos_runs_and_says_what_is_weaker() -> None:
    mac = platforms.of("darwin", "23.6.0", "arm64")
    assert mac.name == "macOS" and not mac.tested and not mac.refused
    check = platform_check(mac)
    assert check.level == "WARN"
    assert "macOS 23.6.0 arm64: not tested here" in check.detail
    for weaker in ("unsandboxed", "no pidfds", "watchdog (FSEvents)", "HANDOFF_HOME short"):
        assert weaker in check.detail, (weaker, check.detail)


def test_native_windows_is_refused_and_another_system_is_warned_about() -> None:
    assert "native Windows" in platforms.of("win32", "", "").refused
    other = platforms.of("freebsd14", "14.1-RELEASE", "amd64")
    assert not other.refused and platform_check(other).level == "WARN"


def test_this_machine_is_linux_and_doctor_says_so(repo: Path) -> None:
    assert platforms.here().name == "Linux"
    done = handoff("doctor", cwd=repo)
    first = done.stdout.splitlines()[0]
    assert first.startswith("OK    platform: Linux ") and "tested" in first, done.stdout


def test_native_windows_gets_one_clear_error_before_any_posix_import(tmp_path: Path) -> None:
    """The real entry point, with the platform Python reports on Windows and the modules
    Windows lacks made unimportable: the refusal comes first, in the house's form."""
    probe = ("import sys\n"
             "sys.platform = 'win32'\n"
             "for name in ('fcntl', 'termios', 'resource'):\n"
             "    sys.modules[name] = None\n"
             "sys.argv = ['handoff', 'start', 'T-1', '--plan', 'plan.md']\n"
             "from handoff.cli.entry import main\n"
             "main()\n")
    done = subprocess.run([PYTHON, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "handoff: error: handoff does not run on native Windows: it needs tmux, POSIX process "
        "groups and file locks",
        "  hint: run handoff inside WSL2 (wsl --install), where it runs as on Linux"]

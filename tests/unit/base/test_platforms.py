"""handoff.platforms: where handoff runs, what is weaker where it is not tested, and native
Windows refused before anything it lacks is imported."""

from __future__ import annotations

import pytest

from handoff import platforms
from handoff.operations.doctor import platform_check


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

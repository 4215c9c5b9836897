"""The real coding CLIs the tests run, pinned, installed from the npm registry into a user cache.

`~/.cache/handoff-tests/npm` (or `$HANDOFF_TEST_CACHE/npm`) is shared by every run on one
machine: the first run installs, later runs reuse it. An install is serialised by a file lock,
so parallel test runs never install over each other. When npm or the registry is not there,
the tests that need a CLI fail with the reason (they never skip).

`HANDOFF_TEST_CLI_VERSIONS=latest` runs the same tests against the newest published release of
each CLI instead, installed into a cache of its own (`npm-latest`, `npm-extra-latest`) and
installed again once it is a day old: a release that breaks handoff shows the day it is used.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

#: package, version, the command it installs
PINNED = {
    "claude": ("@anthropic-ai/claude-code", "2.1.328"),
    "codex": ("@openai/codex", "0.171.0"),
}
EXTRA = {
    "gemini": ("@google/gemini-cli", "0.61.0"),
    "opencode": ("opencode-ai", "1.18.33"),
}
#: read once, before any test fixture points HOME at a private folder
CACHE = Path(os.environ.get("HANDOFF_TEST_CACHE") or Path.home() / ".cache" / "handoff-tests")
#: "pinned" (the default) or "latest": the newest release of each CLI on the registry
VERSIONS = os.environ.get("HANDOFF_TEST_CLI_VERSIONS", "pinned")
if VERSIONS not in ("pinned", "latest"):
    raise RuntimeError(f"HANDOFF_TEST_CLI_VERSIONS={VERSIONS!r}: use pinned or latest")
LATEST = VERSIONS == "latest"
#: a latest install older than this is installed again
LATEST_MAX_AGE = 24 * 3600.0


class NotInstallable(AssertionError):
    """The CLI is missing and cannot be installed here: the test fails with this reason."""


def prefix_for(command: str) -> Path:
    return CACHE / (("npm" if command in PINNED else "npm-extra") + ("-latest" if LATEST else ""))


def expected_version(command: str) -> str:
    """The release the tests run: the pin, or in a latest run what was installed."""
    if not LATEST:
        return {**PINNED, **EXTRA}[command][1]
    binary(command)
    return installed_version(command) or "unknown"


def _fresh(command: str) -> bool:
    """A latest install is reused for a day."""
    try:
        return time.time() - (prefix_for(command) / ".installed").stat().st_mtime < LATEST_MAX_AGE
    except OSError:
        return False


def installed_version(command: str) -> str | None:
    package, _ = {**PINNED, **EXTRA}[command]
    manifest = prefix_for(command) / "node_modules" / package / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return str(version) if version else None


def binary(command: str) -> Path:
    """The pinned CLI's executable, installed first when it is not in the cache yet."""
    override = os.environ.get(f"HANDOFF_TEST_{command.upper()}")
    if override:
        if not Path(override).is_file():
            raise NotInstallable(f"HANDOFF_TEST_{command.upper()}={override} does not exist")
        return Path(override)
    pins = {**PINNED, **EXTRA}
    package, version = pins[command]
    path = prefix_for(command) / "node_modules" / ".bin" / command
    if LATEST:
        if not (_fresh(command) and path.exists()):
            _install(command, f"{package}@latest")
        if not path.exists():
            raise NotInstallable(f"npm installed {package}@latest but {path} is missing")
        return path
    if installed_version(command) == version and path.exists():
        return path
    _install(command, f"{package}@{version}")
    if installed_version(command) != version or not path.exists():
        raise NotInstallable(f"npm installed {package} but {path} (version {version}) is "
                             "still missing")
    return path


def _install(command: str, spec: str) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise NotInstallable(f"{command} is needed and npm is not installed to fetch {spec} "
                             "(install Node.js and npm; .ci/run does)")
    prefix = prefix_for(command)
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        pins = PINNED if command in PINNED else EXTRA
        if _fresh(command) if LATEST else all(installed_version(c) == v
                                              for c, (_, v) in pins.items()):
            return  # another run installed them while we waited for the lock
        specs = [f"{p}@{'latest' if LATEST else v}" for p, v in pins.values()]
        try:
            done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--no-save",
                                   "--prefix", str(prefix), *specs], capture_output=True,
                                  text=True, timeout=900, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise NotInstallable(f"npm install {' '.join(specs)} did not finish in 900s") from None
        if done.returncode != 0:
            raise NotInstallable(f"npm install {' '.join(specs)} failed: "
                                 f"{(done.stderr or done.stdout).strip()[-2000:]}")
        (prefix / ".installed").touch()

"""handoff.loop.scanners: the config's scanners, run as the gate runs its command: real programs,
a real repository, the gate's bounds (a process group ended whole), every scanner in order."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

from handoff.config import Scanner
from handoff.loop.gate import EXCERPT
from handoff.loop.scanners import (
    ScanResult,
    ScanState,
    Scope,
    expand,
    fix_for_missing,
    note,
    run_scanners,
)
from tests.conftest import PYTHON
from tests.unit.loop.test_gate import alive, spawned  # noqa: F401  (spawned: a fixture)

BASE = "b" * 40
HEAD = "c" * 40

#: a scanner: writes the paths it was given to its marker file (proof it ran, and with what),
#: says which of them it cannot open, prints its verdict, exits with the code it is told
SCAN = """\
import json, os, sys
marker, code, *paths = sys.argv[1:]
with open(marker, "w") as f:
    json.dump(paths, f)
for path in paths:
    if not os.path.exists(path):
        print("cannot open", path)
print("scanned", len(paths), "path(s);", "FINDING in " + paths[0] if code != "0" else "clean")
sys.exit(int(code))
"""


def env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}


def write(path: Path, text: str, executable: bool = False) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    if executable:
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def scan(tmp_path: Path, name: str, code: int = 0, *, paths: str = "{changed_files}",
         required: bool = True) -> Scanner:
    """A scanner running SCAN, with its marker file at tmp_path/ran-<name>."""
    script = write(tmp_path / "scan.py", SCAN)
    return Scanner(name=name, command=(PYTHON, str(script), str(tmp_path / f"ran-{name}"),
                                       str(code), paths), required=required)


def ran(tmp_path: Path, name: str) -> list[str] | None:
    """The paths scanner name was given, or None when it never ran."""
    marker = tmp_path / f"ran-{name}"
    if not marker.exists():
        return None
    paths = json.loads(marker.read_text(encoding="utf-8"))
    assert isinstance(paths, list)
    return [str(p) for p in paths]


class Logs:
    """log_of for run_scanners, remembering which scanners it was asked for."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.asked: list[str] = []

    def __call__(self, name: str) -> Path:
        self.asked.append(name)
        return self.folder / f"scan-1-{name}.log"


def run(tmp_path: Path, scanners: Sequence[Scanner], changed: Sequence[str] = ("calc.py",),
        timeout: float = 30, record: Path | None = None,
        fence: Callable[[Sequence[str]], list[str]] | None = None,
        ) -> tuple[list[ScanResult], Logs]:
    """run_scanners in tmp_path, each scanner's log at tmp_path/ticket/scan-1-<name>.log."""
    logs = Logs(tmp_path / "ticket")
    found = run_scanners(scanners, Scope(BASE, HEAD, tuple(changed)), tmp_path, env(), timeout,
                         logs, record=record, fence=fence)
    return found, logs


# ---- expand: the placeholders, filled without a shell ------------------------------------------


def test_a_list_placeholder_is_one_argument_per_path_and_a_space_stays_inside_one() -> None:
    scope = Scope(BASE, HEAD, ("calc.py", "docs/read me.md", "pkg/types.pyi"))
    assert expand(["tool", "-q", "{changed_files}", "--end"], scope) == [
        "tool", "-q", "calc.py", "docs/read me.md", "pkg/types.pyi", "--end"]


def test_changed_py_files_keeps_only_python_sources_and_stubs() -> None:
    scope = Scope(BASE, HEAD, ("calc.py", "README.md", "pkg/types.pyi", "setup.cfg",
                               "old.py.bak", "cache.pyc", "tests/test_calc.py"))
    assert expand(["bandit", "-q", "{changed_py_files}"], scope) == [
        "bandit", "-q", "calc.py", "pkg/types.pyi", "tests/test_calc.py"]


def test_a_list_placeholder_with_no_path_skips_the_scanner() -> None:
    assert expand(["bandit", "{changed_py_files}"], Scope(BASE, HEAD, ("README.md",))) is None
    assert expand(["lint", "{changed_files}"], Scope(BASE, HEAD, ())) is None
    # no list placeholder: nothing changed is no reason to skip it
    assert expand(["gitleaks", "detect"], Scope(BASE, HEAD, ())) == ["gitleaks", "detect"]


def test_text_placeholders_are_filled_inside_any_argument() -> None:
    command = ["gitleaks", "detect", "--log-opts", "{diff_range}", "--from={base}", "{commit}",
               "{base}:{commit}"]
    assert expand(command, Scope(BASE, HEAD, ())) == [
        "gitleaks", "detect", "--log-opts", f"{BASE}..{HEAD}", f"--from={BASE}", HEAD,
        f"{BASE}:{HEAD}"]


def test_a_path_that_starts_with_a_dash_is_never_an_option() -> None:
    scope = Scope(BASE, HEAD, ("-rf", "--version.py", "ok-.py"))
    assert expand(["tool", "{changed_files}"], scope) == ["tool", "./-rf", "./--version.py",
                                                         "ok-.py"]
    assert expand(["tool", "{changed_py_files}"], scope) == ["tool", "./--version.py", "ok-.py"]


def test_an_optional_scanner_that_is_not_installed_only_says_so(tmp_path: Path) -> None:
    optional = Scanner(name="bandit", command=("handoff-no-such-bandit", "-q"), required=False)
    found, logs = run(tmp_path, [optional])
    assert (found[0].state, found[0].required, found[0].blocks) == ("missing", False, False)
    assert logs.asked == []
    assert note(found) is None


# ---- what a person and the implementer are told ------------------------------------------------


def result(name: str, state: str, required: bool = True, output: str = "") -> ScanResult:
    return ScanResult(name=name, required=required, state=ScanState(state), argv=("tool", "calc.py"),
                      summary=f"`tool calc.py` {state} (exit 1) in 0.2s",
                      log=f"/tickets/T-1/scan-1-{name}.log", output=output)


def test_note_names_only_the_blocking_scanners_with_the_end_of_their_output() -> None:
    found = [result("secrets", "failed", output="checking calc.py\nLEAK: calc.py:3 api key\n"),
             result("advice", "failed", required=False, output="ADVICE-OUTPUT"),
             result("clean", "passed", output="CLEAN-OUTPUT"),
             ScanResult(name="gone", required=True, state=ScanState.MISSING, argv=("gone",),
                        summary="not installed: gone is not on the gate's PATH", log="",
                        output="")]
    said = note(found)
    assert said is not None
    title, text = said
    assert title == "The scanners failed"
    assert "secrets" in text and "`tool calc.py` failed (exit 1) in 0.2s" in text
    assert "scan-1-secrets.log" in text
    assert "LEAK: calc.py:3 api key" in text
    for other in ("advice", "ADVICE-OUTPUT", "clean", "CLEAN-OUTPUT", "gone"):
        assert other not in text, other


def test_note_is_none_when_nothing_blocks() -> None:
    assert note([]) is None
    assert note([result("advice", "failed", required=False), result("ok", "passed"),
                 result("py", "skipped"), result("gone", "missing")]) is None


def test_note_bounds_a_huge_output_in_bytes() -> None:
    huge = "HEAD-LINE\n" + "z" * 1_000_000 + "\nTHE-END"
    said = note([result("one", "failed", output=huge), result("two", "failed", output=huge)])
    assert said is not None
    text = said[1]
    assert len(text.encode()) < 2 * (EXCERPT + 500)
    assert text.count("THE-END") == 2 and "HEAD-LINE" not in text


def test_the_fix_for_a_missing_scanner_names_the_program_the_path_and_the_way_out() -> None:
    gitleaks = Scanner(name="secrets", command=("gitleaks", "detect"))
    fix = fix_for_missing(gitleaks, {"PATH": "/opt/scanners/bin:/usr/local/bin:/usr/bin"}, "T-7")
    assert "\n" not in fix
    assert "gitleaks" in fix and "/opt/scanners/bin" in fix
    assert "required: false" in fix and "secrets" in fix and ".handoff.yaml" in fix
    assert "handoff answer T-7 go" in fix

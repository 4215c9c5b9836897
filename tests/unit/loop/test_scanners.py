"""handoff.loop.scanners: the config's scanners, run as the gate runs its command: real programs,
a real repository, the gate's bounds (a process group ended whole), every scanner in order."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from handoff.config import Scanner
from handoff.loop.gate import CAP, EXCERPT
from handoff.loop.scanners import (
    ScanResult,
    ScanState,
    Scope,
    expand,
    fix_for_missing,
    installed,
    note,
    run_scanners,
)
from handoff.machinery.repo import Repo
from tests.conftest import PYTHON, commit_file, git, wait_until
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

#: a scanner that hangs: it starts a child, writes the child's pid, and waits for it
HANG = """\
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(child.pid))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
print("spawned", flush=True)
child.wait()
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


def test_no_shell_reads_a_path(tmp_path: Path) -> None:
    hostile = "$(touch pwned) `touch pwned2`; touch pwned3 | cat *.py"
    found, _ = run(tmp_path, [scan(tmp_path, "literal")], changed=[hostile])
    assert ran(tmp_path, "literal") == [hostile]
    assert found[0].state == "passed"
    for name in ("pwned", "pwned2", "pwned3"):
        assert not (tmp_path / name).exists()


def test_the_scope_of_a_real_branch_reaches_the_scanner_as_paths_it_can_open(
        repo: Path, tmp_path: Path) -> None:
    """base...commit in a real repository: a deleted file is not given, a path with a space or
    a leading dash is one argument the scanner opens from the checkout."""
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "-b", "work")
    commit_file(repo, "docs/read me.md", "notes\n")
    commit_file(repo, "-x.py", "X = 1\n")
    commit_file(repo, "tests/test_calc.py", "# changed\n")
    git(repo, "rm", "-q", "calc.py")
    git(repo, "commit", "-q", "-m", "calc.py goes")
    head = git(repo, "rev-parse", "HEAD")
    changed = Repo.at(repo).present_changes(base, head)
    assert changed == ["-x.py", "docs/read me.md", "tests/test_calc.py"]  # git's (byte) order
    scope = Scope(base, head, tuple(changed))
    every, python = scan(tmp_path, "every"), scan(tmp_path, "python", paths="{changed_py_files}")
    found = run_scanners([every, python], scope, repo, env(), 30, Logs(tmp_path / "ticket"))
    assert [r.state for r in found] == ["passed", "passed"]
    assert ran(tmp_path, "every") == ["./-x.py", "docs/read me.md", "tests/test_calc.py"]
    assert ran(tmp_path, "python") == ["./-x.py", "tests/test_calc.py"]
    assert "cannot open" not in found[0].output + found[1].output


# ---- run_scanners: each bounded as the gate's command, every one in order --------------------


def test_a_passing_and_a_failing_scanner(tmp_path: Path) -> None:
    found, logs = run(tmp_path, [scan(tmp_path, "ok"), scan(tmp_path, "bad", 1)],
                      changed=["calc.py", "notes.md"])
    ok, bad = found
    assert (ok.name, ok.state, ok.required, ok.blocks) == ("ok", "passed", True, False)
    assert (bad.name, bad.state, bad.required, bad.blocks) == ("bad", "failed", True, True)
    argv = (PYTHON, str(tmp_path / "scan.py"), str(tmp_path / "ran-bad"), "1", "calc.py",
            "notes.md")
    assert bad.argv == argv
    assert "scanned 2 path(s); FINDING in calc.py" in bad.output
    assert bad.summary.startswith(f"`{' '.join(argv)}` failed (exit 1) in ")
    assert ok.summary.startswith("`") and " passed in " in ok.summary
    assert logs.asked == ["ok", "bad"]
    lines = (tmp_path / "ticket" / "scan-1-bad.log").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "$ " + " ".join(argv)
    assert "scanned 2 path(s); FINDING in calc.py" in lines
    assert lines[-1] == f"# {bad.summary}"
    assert Path(bad.log).name == "scan-1-bad.log"
    assert bad.fields() == {"name": "bad", "required": True, "state": "failed",
                            "summary": bad.summary, "log": "scan-1-bad.log"}


def test_an_optional_scanner_that_fails_does_not_block(tmp_path: Path) -> None:
    found, _ = run(tmp_path, [scan(tmp_path, "advice", 1, required=False)])
    assert (found[0].state, found[0].required, found[0].blocks) == ("failed", False, False)


def test_every_scanner_runs_even_after_one_failed(tmp_path: Path) -> None:
    scanners = [scan(tmp_path, "one", 1), scan(tmp_path, "two", 2), scan(tmp_path, "three", 0),
                scan(tmp_path, "four", 3)]
    found, _ = run(tmp_path, scanners)
    assert [(r.name, r.state) for r in found] == [
        ("one", "failed"), ("two", "failed"), ("three", "passed"), ("four", "failed")]
    assert ["(exit 1)" in found[0].summary, "(exit 2)" in found[1].summary,
            "(exit 3)" in found[3].summary] == [True, True, True]
    for name in ("one", "two", "three", "four"):
        assert ran(tmp_path, name) == ["calc.py"], name


def test_a_required_scanner_that_is_not_installed_is_missing_and_the_rest_still_run(
        tmp_path: Path) -> None:
    missing = Scanner(name="gitleaks", command=("handoff-no-such-scanner-xyz", "detect"))
    found, logs = run(tmp_path, [scan(tmp_path, "first"), missing, scan(tmp_path, "third", 1)])
    assert [r.state for r in found] == ["passed", "missing", "failed"]
    gone = found[1]
    assert (gone.name, gone.required, gone.blocks) == ("gitleaks", True, False)
    assert gone.argv == ("handoff-no-such-scanner-xyz", "detect")
    assert "not installed" in gone.summary and "handoff-no-such-scanner-xyz" in gone.summary
    assert (gone.log, gone.output) == ("", "")
    # run_gate writes a log even for a program it cannot start: none means it was not called
    assert logs.asked == ["first", "third"]
    assert not (tmp_path / "ticket" / "scan-1-gitleaks.log").exists()
    assert ran(tmp_path, "first") == ["calc.py"] and ran(tmp_path, "third") == ["calc.py"]
    said = note(found)
    assert said is not None and "gitleaks" not in said[1], "missing is not failed: no round fixes it"


def test_an_optional_scanner_that_is_not_installed_only_says_so(tmp_path: Path) -> None:
    optional = Scanner(name="bandit", command=("handoff-no-such-bandit", "-q"), required=False)
    found, logs = run(tmp_path, [optional])
    assert (found[0].state, found[0].required, found[0].blocks) == ("missing", False, False)
    assert logs.asked == []
    assert note(found) is None


def test_nothing_to_scan_skips_the_scanner_and_starts_no_process(tmp_path: Path) -> None:
    found, logs = run(tmp_path, [scan(tmp_path, "python", paths="{changed_py_files}"),
                                 scan(tmp_path, "after")], changed=["README.md"])
    skipped = found[0]
    assert (skipped.state, skipped.argv, skipped.log, skipped.output) == ("skipped", (), "", "")
    assert skipped.summary.startswith("skipped")
    assert not skipped.blocks
    assert ran(tmp_path, "python") is None, "the scanner's program ran"
    assert logs.asked == ["after"] and not (tmp_path / "ticket" / "scan-1-python.log").exists()
    assert ran(tmp_path, "after") == ["README.md"]


def test_a_hanging_scanner_is_ended_with_its_whole_group_and_fails(
        tmp_path: Path, spawned: Path) -> None:  # noqa: F811
    hang = Scanner(name="hang", command=(PYTHON, str(write(tmp_path / "hang.py", HANG)),
                                         str(spawned)))
    found, _ = run(tmp_path, [hang, scan(tmp_path, "after")], timeout=3)
    hung = found[0]
    assert (hung.state, hung.blocks) == ("failed", True)
    assert "timed out after" in hung.summary and "exit" not in hung.summary  # the gate's own
    assert "spawned" in hung.output
    child = int(spawned.read_text(encoding="utf-8"))
    wait_until(lambda: not alive(child), timeout=10, what=f"the scanner's child {child} to end")
    assert found[1].state == "passed" and ran(tmp_path, "after") == ["calc.py"]


def test_a_flood_is_capped_as_the_gates_output_is(tmp_path: Path) -> None:
    flood = Scanner(name="flood", command=(
        PYTHON, "-c", "print('FIRST'); print('x' * 300_000); print('LAST'); raise SystemExit(1)"))
    found, _ = run(tmp_path, [flood])
    assert found[0].state == "failed"
    assert len(found[0].output.encode()) < CAP + 200
    assert found[0].output.startswith("FIRST") and found[0].output.rstrip().endswith("LAST")
    assert (tmp_path / "ticket" / "scan-1-flood.log").stat().st_size < CAP + 2000


def test_each_scanner_is_recorded_as_the_running_gate_and_the_record_removed(
        tmp_path: Path) -> None:
    """The record end_left_gate reads names the scanner's own process while it runs (it is
    written first without a pid, before the fork, and then with it: the scanner waits, at most
    10 s, for the second)."""
    record = tmp_path / "gate-running.json"
    code = ("import json, os, sys, time\n"
            "end = time.monotonic() + 10\n"
            "while 'pid' not in (data := json.load(open(sys.argv[1]))) "
            "and time.monotonic() < end:\n"
            "    time.sleep(0.01)\n"
            "print('recorded', data.get('pid') == os.getpid())")
    found, _ = run(tmp_path, [Scanner(name="a", command=(PYTHON, "-c", code, str(record))),
                              Scanner(name="b", command=(PYTHON, "-c", code, str(record)))],
                   record=record)
    assert [r.output.strip() for r in found] == ["recorded True", "recorded True"]
    assert not record.exists()


def test_the_fence_wraps_what_runs_and_the_result_names_the_scanner_itself(
        tmp_path: Path) -> None:
    wrapper = write(tmp_path / "fence.py", "import os, sys\n"
                    "open(sys.argv[1], 'a').write(sys.argv[2] + '\\n')\n"
                    "os.execv(sys.argv[2], sys.argv[2:])\n")
    fenced = tmp_path / "fenced"

    def fence(argv: Sequence[str]) -> list[str]:
        return [PYTHON, str(wrapper), str(fenced), *argv]

    scanner = scan(tmp_path, "inside")
    found, _ = run(tmp_path, [scanner], fence=fence)
    assert found[0].state == "passed" and ran(tmp_path, "inside") == ["calc.py"]
    assert fenced.read_text(encoding="utf-8") == f"{PYTHON}\n"
    argv = (*scanner.command[:-1], "calc.py")
    assert found[0].argv == argv
    log = (tmp_path / "ticket" / "scan-1-inside.log").read_text(encoding="utf-8")
    assert log.splitlines()[0] == "$ " + " ".join(argv)


# ---- installed: the gate's PATH, the checkout for a relative program ---------------------------


def test_a_program_is_looked_for_on_the_gates_path_not_the_orchestrators(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    program = write(tools / "fakescan", f"#!{PYTHON}\nprint('fakescan ran')\n", executable=True)
    gate_env = {"PATH": f"{tools}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    assert installed("fakescan", gate_env, tmp_path) == str(program)
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    assert installed("fakescan", {"PATH": "/usr/bin:/bin"}, tmp_path) is None
    assert installed("fakescan", {}, tmp_path) is None, "no PATH in the gate's environment"
    only = Scanner(name="fake", command=("fakescan",))
    found = run_scanners([only], Scope(BASE, HEAD, ()), tmp_path, gate_env, 30,
                         Logs(tmp_path / "ticket"))
    assert (found[0].state, found[0].output.strip()) == ("passed", "fakescan ran")
    found = run_scanners([only], Scope(BASE, HEAD, ()), tmp_path, {"PATH": "/usr/bin:/bin"},
                         30, Logs(tmp_path / "ticket"))
    assert found[0].state == "missing"


def test_a_relative_program_is_found_in_the_checkout(tmp_path: Path) -> None:
    checkout = tmp_path / "checkout"
    program = write(checkout / "scripts" / "scan.sh", f"#!{PYTHON}\nprint('in checkout')\n",
                    executable=True)
    write(checkout / "scripts" / "plain.sh", "print('never')\n")  # not executable
    assert installed("./scripts/scan.sh", env(), checkout) == str(program)
    assert installed("./scripts/plain.sh", env(), checkout) is None
    assert installed("./scripts/absent.sh", env(), checkout) is None
    assert installed(str(program), env(), tmp_path) == str(program)
    assert installed("./scripts/scan.sh", env(), tmp_path) is None, "relative to the checkout"
    found = run_scanners([Scanner(name="local", command=("./scripts/scan.sh",)),
                          Scanner(name="plain", command=("./scripts/plain.sh",))],
                         Scope(BASE, HEAD, ()), checkout, env(), 30, Logs(tmp_path / "ticket"))
    assert [(r.state, r.output.strip()) for r in found] == [("passed", "in checkout"),
                                                            ("missing", "")]


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

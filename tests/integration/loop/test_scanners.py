"""handoff.loop.scanners: the config's scanners, run as the gate runs its command: real programs,
a real repository, the gate's bounds (a process group ended whole), every scanner in order."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from handoff.config import Scanner
from handoff.loop.gate import CAP
from handoff.loop.scanners import (
    Scope,
    installed,
    note,
    run_scanners,
)
from handoff.machinery.repo import Repo
from tests.conftest import PYTHON, commit_file, git, wait_until
from tests.unit.loop.test_gate import alive, spawned  # noqa: F401  (spawned: a fixture)
from tests.unit.loop.test_scanners import BASE, HEAD, Logs, env, ran, run, scan, write

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

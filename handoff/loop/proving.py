"""How the plan's test command runs only the new tests, and what each did at the base.

pytest gets the tests' node ids and `-rA` (a line per test in its short summary); unittest
gets `-v` and a `-k` pattern per test (each test's own line). Any other runner runs whole, and
its new tests are judged together: when the command passes at the base, every one of them
passed there; when it fails, handoff cannot say which failed. Read from the output alone,
which the code under test can print into: what it shows is a claim about the base, and it
only ever lists a test to the reviewers, never lets a change through.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum

from handoff.loop.newtests import NewTest


class Outcome(StrEnum):
    """What a new test did at the base, the test files of the change laid over it."""

    #: the proof: it fails without the change and passes with it (the gate passed)
    FAILS = "fails on base"
    #: it proves nothing about the change: listed to every reviewer, who answers it
    PASSES = "passes on base"
    #: its file does not load at the base (it imports what the change adds), or it was
    #: skipped there
    CANNOT_RUN = "cannot run on base"
    #: a runner whose tests run only together, which failed at the base: one of them failed
    TOGETHER = "fails on base with the others"
    #: the run said nothing of it (it timed out, or a limit ended it)
    UNKNOWN = "not known"


PYTEST, UNITTEST, WHOLE = "pytest", "unittest", "whole"
#: options of pytest that choose tests, dropped (with their value: VALUED_CHOOSING): the new
#: tests are chosen
CHOOSING = {"-k", "-m", "--deselect", "--lf", "--ff", "--sw", "-x", "--ignore", "--ignore-glob"}
VALUED_CHOOSING = {"-k", "-m", "--deselect", "--ignore", "--ignore-glob"}
#: pytest's (and its common plugins') options whose value is the next word, kept with it
VALUED = {"-p", "-c", "-o", "-W", "-n", "-r", "--rootdir", "--confcutdir", "--basetemp", "--tb",
          "--maxfail", "--durations", "--import-mode", "--capture", "--log-level", "--cov",
          "--cov-report", "--cov-config", "--timeout", "--dist", "--override-ini",
          "--config-file", "--pythonwarnings"}
SUMMARY = re.compile(r"^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (\S+)")
VERBOSE = re.compile(r"^(test\w*) \(([\w.]+)\)[^\n]*?\.\.\. ?(ok|FAIL|ERROR|skipped|expected "
                     r"failure|unexpected success)?", re.M)
COLLECTING = re.compile(r"^_+ ERROR collecting (\S+) _+$")
DETAIL = re.compile(r"^(FAIL|ERROR): ([\w.]+) \(([\w.]+)\)", re.M)


def runner(argv: Sequence[str]) -> str:
    words = [arg.rsplit("/", 1)[-1] for arg in argv]
    if "pytest" in words or "py.test" in words:
        return PYTEST
    if "unittest" in words:
        return UNITTEST
    return WHOLE


def selected(argv: Sequence[str], tests: Sequence[NewTest]) -> list[str]:
    """The plan's command, running only tests (a WHOLE runner's: the command as it is)."""
    kind = runner(argv)
    if kind == PYTEST:
        return [*_pytest_options(argv), "-rA", *(t.node for t in tests)]
    if kind == UNITTEST:
        return _unittest_selected(argv, tests)
    return list(argv)


def _unittest_selected(argv: Sequence[str], tests: Sequence[NewTest]) -> list[str]:
    """Discovery (`discover`, or no target named) kept, each test chosen with `-k`: the tests
    load as the plan's command loads them. A command that names its targets has them
    replaced by the tests' own dotted names."""
    words = [arg.rsplit("/", 1)[-1] for arg in argv]
    at = words.index("unittest")
    rest = list(argv[at + 1:])
    targets = [arg for i, arg in enumerate(rest)
               if not arg.startswith("-") and (i == 0 or rest[i - 1] not in ("-k",))]
    if "discover" in rest or not targets:
        return [*argv, "-v", *(arg for t in tests for arg in ("-k", f"*.{_dotted(t)}"))]
    options = [arg for arg in rest if arg.startswith("-") and arg != "-k"
               and arg not in targets]
    return [*argv[:at + 1], *options, "-v", *(_module(t) + "." + _dotted(t) for t in tests)]


def _module(test: NewTest) -> str:
    return test.file.removesuffix(".py").replace("/", ".")


def _pytest_options(argv: Sequence[str]) -> list[str]:
    """argv up to pytest and its options, without the paths it names and the options that
    choose tests."""
    words = [arg.rsplit("/", 1)[-1] for arg in argv]
    at = words.index("pytest") if "pytest" in words else words.index("py.test")
    out: list[str] = list(argv[:at + 1])
    drop = keep = False
    for arg in argv[at + 1:]:
        if drop or keep:
            out += [arg] if keep else []
            drop = keep = False
        elif arg in CHOOSING or arg.split("=", 1)[0] in CHOOSING or \
                (arg[:2] in ("-k", "-m") and not arg.startswith("--")):
            drop = arg in VALUED_CHOOSING  # its value is the next word
        elif arg.startswith("-"):
            out.append(arg)
            keep = arg in VALUED
    return out


def _dotted(test: NewTest) -> str:
    return ".".join(part for part in (test.cls.replace("::", "."), test.name) if part)


def outcomes(argv: Sequence[str], tests: Sequence[NewTest], output: str, exit_code: int | None,
             ended: bool) -> dict[str, tuple[Outcome, str]]:
    """node → (what it did at the base, a word on why) for each test the output speaks of;
    ended: the run timed out or reached a limit."""
    kind = runner(argv)
    if kind == PYTEST:
        said = _pytest(tests, output)
    elif kind == UNITTEST:
        said = _unittest(tests, output)
    elif exit_code == 0 and not ended:
        said = {t.node: (Outcome.PASSES, "the command passed at the base") for t in tests}
    else:
        why = "the command failed at the base; this runner's tests run only together"
        said = {t.node: (Outcome.TOGETHER if not ended else Outcome.UNKNOWN, why)
                for t in tests}
    return said


def unsaid(ended: bool) -> tuple[Outcome, str]:
    """What a test the runs never spoke of did: not known when a run was cut short, else it
    did not run (its file did not load, or the runner never found it)."""
    return (Outcome.UNKNOWN, "the run ended before it said") if ended else \
        (Outcome.CANNOT_RUN, "it did not run at the base: its file does not load there, or "
                             "the plan's command does not run it")


def uncollected(output: str) -> set[str]:
    """The files pytest could not collect (`ERROR path` in its summary): such a file stops
    a run that names its tests, which is made again without them."""
    return {match.group(2) for line in output.splitlines()
            if (match := SUMMARY.match(line.strip())) and match.group(1) == "ERROR"
            and "::" not in match.group(2)}


def _pytest(tests: Sequence[NewTest], output: str) -> dict[str, tuple[Outcome, str]]:
    said: dict[str, tuple[Outcome, str]] = {}
    errors = _collection_errors(output)
    for line in output.splitlines():
        match = SUMMARY.match(line.strip())
        if not match:
            continue
        word, node = match.groups()
        why = line.strip()[len(word) + 1 + len(node):].lstrip(" -")[:200]
        for test in tests:
            if "::" not in node and same_file(node, test.file):  # its file did not collect
                said.setdefault(test.node, (Outcome.CANNOT_RUN, why or errors.get(
                    node, "its file errs at collection at the base")))
            elif _same_node(node, test):
                said[test.node] = {"PASSED": (Outcome.PASSES, ""), "XPASS": (Outcome.PASSES, ""),
                                   "SKIPPED": (Outcome.CANNOT_RUN, why or "skipped there")
                                   }.get(word, (Outcome.FAILS, why))
    return said


def _collection_errors(output: str) -> dict[str, str]:
    """file → the first `E ` line of pytest's "ERROR collecting file" section (what the
    summary line leaves out under -q)."""
    found: dict[str, str] = {}
    current = ""
    for line in output.splitlines():
        header = COLLECTING.match(line)
        if header:
            current = header.group(1)
        elif line.startswith("E ") and current and current not in found:
            found[current] = line[1:].strip()[:200]
        elif line.startswith(("=", "_")):
            current = ""
    return found


def same_file(reported: str, file: str) -> bool:
    """pytest names a file from its rootdir, which may be below the checkout's top."""
    return file == reported or file.endswith("/" + reported)


def _same_node(reported: str, test: NewTest) -> bool:
    file, _, rest = reported.partition("::")
    rest = rest.split("[", 1)[0]  # a parametrised test's every case is the test
    return rest == "::".join(p for p in (test.cls, test.name) if p) and same_file(file, test.file)


def _unittest(tests: Sequence[NewTest], output: str) -> dict[str, tuple[Outcome, str]]:
    """From `-v`: a test's own line says it ran (ok, or skipped); its FAIL: or ERROR: block
    below says it failed (a test that prints puts its word on a later line); a module that
    does not import is a failed test of unittest's loader named after it."""
    said: dict[str, tuple[Outcome, str]] = {}
    failed = {(m.group(2), m.group(3)) for m in DETAIL.finditer(output)}
    broken = {name for name, where in failed if "_FailedTest" in where}
    for test in tests:
        module = _module(test)
        if any(module == name or module.endswith("." + name) for name in broken):
            said[test.node] = (Outcome.CANNOT_RUN, "its module does not import at the base")
            continue
        for match in VERBOSE.finditer(output):
            name, where, word = match.groups()
            if name != test.name or not _unittest_owner(where, test):
                continue
            if (name, where) in failed:
                said[test.node] = (Outcome.FAILS, "")
            elif word == "skipped":
                said[test.node] = (Outcome.CANNOT_RUN, "skipped there")
            else:
                said[test.node] = (Outcome.PASSES, "")
    return said


def _unittest_owner(where: str, test: NewTest) -> bool:
    """unittest names a test (module.Class.test) from Python 3.11, (module.Class) before."""
    return where.endswith("." + _dotted(test)) or where.endswith(
        "." + test.cls.split("::")[-1])


# ---- a round's record (State.proofs), as the briefs and the final report show it ---------

def listed(record: object) -> list[dict[str, object]]:
    """A round's proof record's tests, each with its `node` (as pytest names it)."""
    tests = record.get("tests") if isinstance(record, dict) else None
    out = []
    for test in tests if isinstance(tests, list) else []:
        if isinstance(test, dict):
            node = NewTest(str(test.get("file", "")), str(test.get("cls", "")),
                           str(test.get("name", "")), 0).node
            out.append({**test, "node": node})
    return out


def unproven(record: object) -> list[tuple[str, str]]:
    """(id, what) of each test that passed at the base too: what the reviewers answer."""
    return [(str(t["id"]), f"`{t['node']}` passes at the base too, without the change")
            for t in listed(record) if t.get("id")]


def described(test: dict[str, object]) -> str:
    """One test's line in the final report and the reviewers' note."""
    outcome = str(test.get("outcome", ""))
    said = "fails on base, passes on the change" if outcome == Outcome.FAILS else outcome
    why = f" ({test['why']})" if test.get("why") and outcome != Outcome.FAILS else ""
    ident = f"{test['id']} " if test.get("id") else ""
    return f"{ident}`{test['node']}`: {said}{why}"


def mutants_said(record: object) -> str:
    """A round's mutants in one line ('' when none were asked): how many the new tests caught,
    and where each survivor is."""
    said = record.get("mutants") if isinstance(record, dict) else None
    if not isinstance(said, dict):
        return ""
    survived = [s for s in said.get("survived", []) if isinstance(s, dict)]
    where = "; ".join(f"{s.get('file')}:{s.get('line')} `{str(s.get('now', '')).strip()}`"
                      for s in survived)
    return (f"mutants of the changed lines: the new tests caught {said.get('caught', 0)} of "
            f"{said.get('tried', 0)}" + (f"; survived: {where}" if where else ""))

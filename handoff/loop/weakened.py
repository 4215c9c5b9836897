"""What a change did to the tests: test files deleted, tests removed, assertions removed, new
skips, and changes to the files that decide which tests run (handoff.loop.testconfig).

The commonest way a coding agent "passes" is to change the tests. Each review round compares
the test files at the ticket's base and at the commit under review, and every reviewer is
shown what got weaker (W1, W2, …) and must answer each one. Nothing is refused for it: a plan
may mean a test to go, and the reviewers say whether it should have.

Read from the diff alone (-U0, renames found), by patterns per language: a heuristic, which
leaves out what only moved (a test to another file, a file to another test path, a skip or
an assertion to another line) and an assertion rewritten (one removed, one added). The test
configuration is read at both ends of the change where only parts of a file count (a table of
pyproject.toml, a section of tox.ini, a key of package.json). And when the orchestrator knows
the gate ran fewer tests at the commit than at the base (handoff.loop.testcount), that is one
more entry the reviewers answer (`with_fewer_tests`).
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from handoff.loop import testconfig, testcount
from handoff.loop.testconfig import Watched
from handoff.machinery.repo import Repo, run
from handoff.protocol import diffs
from handoff.protocol.diffs import DELETED, RENAMED, FileDiff, Line

DELETED_FILE, REMOVED_TEST, REMOVED_ASSERTION, NEW_SKIP, TEST_CONFIG, FEWER_TESTS = (
    "deleted-file", "removed-test", "removed-assertion", "new-skip", "test-config",
    "fewer-tests")
KINDS = (DELETED_FILE, REMOVED_TEST, REMOVED_ASSERTION, NEW_SKIP, TEST_CONFIG, FEWER_TESTS)
PHRASES = {DELETED_FILE: "test file deleted", REMOVED_TEST: "test removed",
           REMOVED_ASSERTION: "assertion removed", NEW_SKIP: "skip added",
           TEST_CONFIG: "test configuration changed", FEWER_TESTS: "fewer tests ran"}
#: bytes of a test configuration file read at either end of a change; a bigger one has every
#: changed line listed instead of only its watched parts
CONFIG_LIMIT = 1024 * 1024
#: characters of a test's name or line kept
TEXT_LIMIT = 200

TEST_FOLDERS = {"tests", "test", "testing", "spec", "specs", "__tests__", "e2e"}
TEST_FILE = re.compile(
    r"test_.*\.py|.*_test\.py|conftest\.py|.*_test\.go"
    r"|.*\.(?:test|spec)\.(?:js|jsx|ts|tsx|mjs|cjs)"
    r"|.*Tests?\.java|.*Tests?\.kt|.*_spec\.rb|.*_test\.rb|test_.*\.rb")
#: what names a test file in a command, besides a folder: its language's own extensions
SOURCE = re.compile(r".+\.(?:py|js|jsx|ts|tsx|mjs|cjs|go|rb|java|kt|rs)")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
#: what ends a file's name rather than a module's: `-c pytest.ini`, `--config jest.json`
FILE_ENDS = {"ini", "cfg", "toml", "json", "yaml", "yml", "txt", "xml", "md", "sh", "lock", "conf"}
#: a command's options whose value is no test path: `python -m pytest`, `pytest -k add`
VALUED = {"-m", "-k", "-p"}

#: a test's definition, the name it goes by in the last group
DEFINITIONS = (
    re.compile(r"(?:async\s+)?def\s+(test_\w+)"),
    re.compile(r"class\s+(Test\w+)"),
    re.compile(r"""[xf]?(?:it|test|describe)(?:\.\w+)?\s*\(\s*(['"`])(.*?)\1"""),
    re.compile(r"func\s+(Test\w+)\s*\("),
)
#: an annotation that makes the method after it a test (Java, Kotlin, Rust)
ANNOTATION = re.compile(r"(@Test\b|#\[test\])\s*(.*)")
SIGNATURE = re.compile(r"(\w+)\s*\(")
ASSERTION = re.compile(
    r"^assert\b|\bassert\w*[!(.]|\bassert_\w+|\bself\.assert\w+|\bpytest\.raises\("
    r"|\bexpect\s*[({]|\bt\.(?:Error|Fatal)\w*\(|\brequire\.\w+\(")
SKIP = re.compile(
    r"\bpytest\.mark\.(?:skip|skipif|xfail)\b|\bpytest\.(?:skip|xfail|importorskip)\("
    r"|\bunittest\.(?:skip|skipIf|skipUnless|expectedFailure)\b|\bself\.skipTest\("
    r"|\braise\s+unittest\.SkipTest\b|\b(?:it|test|describe)\.(?:skip|todo)\("
    r"|\bx(?:it|describe|test)\(|\bt\.Skip(?:Now|f)?\(|#\[ignore\b|@Disabled\b|@Ignore\b")
#: Ruby's own (`skip "why"`, `pending`, `xit "…" do`), only in Ruby: `skip = …` is Python too
RUBY_SKIP = re.compile(r"^(?:skip|pending)\b(?!\s*=)|^x(?:it|describe|context|specify)\b")
#: a focused test: the others beside it do not run
ONLY = re.compile(r"\b(?:it|test|describe|context|suite)\.only\(")
ONLY_NOTE = " (.only: the other tests there no longer run)"
#: pytest collects nothing from a module or class that says so
NOT_A_TEST = re.compile(r"^__test__\s*=\s*False\b")
#: a Go build constraint: the file's tests build only when it holds (`//go:build never`)
GO_BUILD = re.compile(r"^//\s*(?:go:build\s|\+build\s)")
GO_BUILD_NOTE = " (a build constraint: the file's tests build only when it holds)"
#: what, added to a test file, decides which of its tests run: unittest's load_tests, a
#: plugin pytest loads for it
LOADERS = re.compile(r"^(?:async\s+)?def\s+load_tests\s*\(|^pytest_plugins\s*[:=]")


@dataclass(frozen=True)
class Weakening:
    """One thing the change did to the tests, as a reviewer must answer it."""

    id: str  # W1, W2, … in the order listed (by file, then line)
    file: str  # the test file; its path at the base for what was removed
    line: int  # at the base for what was removed, at the commit for a new skip; 0: a file
    kind: str  # one of KINDS
    text: str  # the test's name, the assertion's or the skip's line

    def render(self) -> str:
        return f"{self.id} {self.describe()}"

    def describe(self) -> str:
        """What it is, where, as a person reads it (a brief lists it beside its id)."""
        if self.kind == DELETED_FILE:
            note = f" ({self.text})" if self.text and self.text != self.file else ""
            return f"{self.file}: {PHRASES[self.kind]}{note}"
        if self.kind == FEWER_TESTS:
            return f"the gate: {PHRASES[self.kind]}: {self.text}"
        fence = "``" if "`" in self.text else "`"
        pad = " " if fence == "``" else ""
        where = f"{self.file}:{self.line}" if self.line else self.file
        return (f"{where}: {PHRASES.get(self.kind, self.kind)}: "
                f"{fence}{pad}{self.text}{pad}{fence}")

    def fields(self) -> dict[str, object]:
        return {"id": self.id, "file": self.file, "line": self.line, "kind": self.kind,
                "text": self.text}


def described(fields: Mapping[str, object]) -> str:
    """One weakening as the state keeps it (its `fields`), described as `Weakening.describe`."""
    line = fields.get("line")
    return Weakening(str(fields.get("id", "")), str(fields.get("file", "")),
                     line if isinstance(line, int) else 0, str(fields.get("kind", "")),
                     str(fields.get("text", ""))).describe()


def is_test_path(path: str, named: Collection[str] = ()) -> bool:
    """A test file: under a test folder, named as a test, or named by the plan's commands (the
    file itself, or a folder it is under)."""
    parts = path.split("/")
    if any(part.lower() in TEST_FOLDERS for part in parts[:-1]) or TEST_FILE.fullmatch(parts[-1]):
        return True
    return any(path == n or path.startswith(n.rstrip("/") + "/") for n in named if n)


def named_paths(commands: Sequence[Sequence[str]]) -> set[str]:
    """The test paths the plan's commands name, so that a project's own layout counts
    (`pytest qa/`): a relative path (a pytest node id's file part), or a Python module (dotted
    anywhere, or a plain name given to unittest). A module a.b names the file a/b.py, the
    folder a/b/ (a package) and a/ (its package); a part from a capital on is a class, no path.
    The program, options and the value of -m, -k and -p name nothing."""
    found: set[str] = set()
    for argv in commands:
        unittest = False
        for before, arg in pairwise(argv):
            unittest = unittest or before == "unittest" or before.endswith("/unittest")
            arg = arg.split("::", 1)[0]  # a pytest node id: its file
            if arg.startswith("-") or before in VALUED or any(c in arg for c in "*?[="):
                continue  # an option, its value, a glob
            if "/" in arg or SOURCE.fullmatch(arg) or arg.rsplit(".", 1)[-1] in FILE_ENDS:
                found.update(_relative(arg))
            elif DOTTED.fullmatch(arg) and ("." in arg or (unittest and arg != "discover")):
                found.update(_module(arg))
    return found


def _relative(arg: str) -> list[str]:
    if "://" in arg or arg.startswith(("/", "~")):
        return []
    path = posixpath.normpath(arg.removesuffix("/..."))  # go test ./pkg/...
    return [] if path == "." or path.startswith("../") else [path]


def _module(name: str) -> list[str]:
    parts = name.split(".")
    classes = [i for i, part in enumerate(parts) if part[:1].isupper()]
    parts = parts[:classes[0]] if classes else parts
    if not parts:
        return []
    module = "/".join(parts)
    return [f"{module}.py", module, *(["/".join(parts[:-1])] if len(parts) > 1 else [])]


def weakenings(files: Sequence[FileDiff], named: Collection[str] = (),
               watch: Sequence[Watched] = testconfig.WATCHED,
               read: testconfig.Reader | None = None) -> list[Weakening]:
    """What the change in files did to the test files and the test configuration, W1… by
    file and line. A test file renamed to a path that is no test is listed as deleted; one
    renamed to another test path is read as any other changed test file. watch: the files
    that decide which tests run; read: their text at either end (without it, a file watched
    in parts has every changed line listed)."""
    found: list[tuple[str, int, str, str]] = []
    tests: list[FileDiff] = []
    for diff in files:
        was = bool(diff.old_path) and is_test_path(diff.old_path, named)
        if diff.status == DELETED and was:
            found.append((diff.old_path, 0, DELETED_FILE, diff.old_path))
        elif diff.status == RENAMED and was and not is_test_path(diff.new_path, named):
            found.append((diff.old_path, 0, DELETED_FILE, f"renamed to {diff.new_path}"))
        elif diff.status != DELETED and is_test_path(diff.new_path, named):
            tests.append(diff)
    added = {name for diff in tests for hunk in diff.hunks
             for _, _, name, _ in _definitions(hunk.added)}
    config = testconfig.changes(files, watch, read)
    whole = {file for file, _, _ in config}
    for diff in tests:
        found += _tests_and_assertions(diff, added)
        found += _skips(diff)
        if diff.new_path not in whole:  # a conftest.py is listed whole already
            found += _loaders(diff)
    found += [(file, line, TEST_CONFIG, text) for file, line, text in config]
    found.sort(key=lambda w: (w[0], w[1], KINDS.index(w[2]), w[3]))
    return [Weakening(f"W{i}", file, line, kind, _clip(text))
            for i, (file, line, kind, text) in enumerate(found, start=1)]


def _definitions(lines: Sequence[Line]) -> Iterable[tuple[int, int, str, str]]:
    """(index of its first line, index of its last, name, text) of each test definition in a
    run of lines: the name '' when an annotation's method is not among them (then the text
    is the annotation and the line after it)."""
    for i, line in enumerate(lines):
        text = line.text.strip()
        for pattern in DEFINITIONS:
            match = pattern.match(text)
            if match:
                yield i, i, match.group(match.lastindex or 1), match.group(match.lastindex or 1)
                break
        else:
            annotated = ANNOTATION.match(text)
            if annotated:
                yield _annotated(lines, i, annotated)


def _annotated(lines: Sequence[Line], i: int, match: re.Match[str]) -> tuple[int, int, str, str]:
    """A test annotation's method: on its own line, or on the next lines of the same run
    (other annotations between)."""
    signature = SIGNATURE.search(match.group(2)) if match.group(2) else None
    if signature:
        return i, i, signature.group(1), signature.group(1)
    last = i
    while last + 1 < len(lines) and lines[last + 1].number == lines[last].number + 1:
        last += 1
        text = lines[last].text.strip()
        if text.startswith(("@", "#[")):
            continue
        signature = SIGNATURE.search(text)
        if signature:
            return i, last, signature.group(1), signature.group(1)
        return i, last, "", f"{match.group(1)} {text}"
    return i, i, "", match.group(1)


def _covered(lines: Sequence[Line]) -> tuple[list[tuple[int, str, str]], set[int]]:
    """The definitions in a run of removed lines ((line, name, text) each), and the indexes of
    the lines inside them: the definition's own and the lines after it, back to back, that are
    blank, more indented, or close a bracket at its indentation."""
    starts = {first: (last, name, text) for first, last, name, text in _definitions(lines)}
    defined: list[tuple[int, str, str]] = []
    inside: set[int] = set()
    open_: list[int] = []  # the indentation of each definition the lines are in
    own = -1  # the last line of the definition itself (an annotation's method)
    for i, line in enumerate(lines):
        if i and line.number != lines[i - 1].number + 1:
            open_ = []  # not back to back: a kept line came between
        text = line.text.expandtabs(8)
        depth = len(text) - len(text.lstrip())
        if i > own and text.strip():
            closing = text.lstrip()[:1] in ")]}"
            while open_ and (depth < open_[-1] or (depth == open_[-1] and not closing)):
                open_.pop()
        if open_:
            inside.add(i)
        if i in starts:
            last, name, shown = starts[i]
            defined.append((line.number, name, shown))
            inside.update(range(i, last + 1))
            open_.append(depth)
            own = max(own, last)
    return defined, inside


def _tests_and_assertions(diff: FileDiff, added: set[str]) -> list[tuple[str, int, str, str]]:
    """The tests removed from one file and its assertions removed outside them."""
    file = diff.old_path or diff.new_path
    found: list[tuple[str, int, str, str]] = []
    loose: list[Line] = []  # removed assertions outside any removed test
    within: list[Line] = []  # and inside one (moved or listed as removed)
    for hunk in diff.hunks:
        defined, inside = _covered(hunk.removed)
        found += [(file, number, REMOVED_TEST, shown) for number, name, shown in defined
                  if not name or name not in added]
        for i, line in enumerate(hunk.removed):
            if _asserts(line.text):
                (within if i in inside else loose).append(line)
    back = Counter(_norm(line.text) for hunk in diff.hunks for line in hunk.added
                   if _asserts(line.text))
    # a moved test's assertions take their copies first
    for line, listed in [*((line, False) for line in within), *((line, True) for line in loose)]:
        if back[_norm(line.text)] > 0:
            back[_norm(line.text)] -= 1
        elif listed:
            found.append((file, line.number, REMOVED_ASSERTION, line.text.strip()))
    lost = [w for w in found if w[2] == REMOVED_ASSERTION]
    if len(lost) <= back.total():  # as many assertions added as lost: rewritten, not removed
        found = [w for w in found if w[2] != REMOVED_ASSERTION]
    return found


def _skips(diff: FileDiff) -> list[tuple[str, int, str, str]]:
    """The lines one file's change added that skip tests or expect them to fail, but those
    that only moved there (the same line removed from the file)."""
    ruby, go = diff.new_path.endswith(".rb"), diff.new_path.endswith(".go")
    moved = Counter(_norm(line.text) for hunk in diff.hunks for line in hunk.removed
                    if _skip_note(line.text, ruby, go) is not None)
    found = []
    for hunk in diff.hunks:
        for line in hunk.added:
            note = _skip_note(line.text, ruby, go)
            if note is None:
                continue
            if moved[_norm(line.text)] > 0:
                moved[_norm(line.text)] -= 1
                continue
            text = line.text.strip()
            found.append((diff.new_path, line.number, NEW_SKIP,
                          _clip(text, TEXT_LIMIT - len(note)) + note))
    return found


def _skip_note(text: str, ruby: bool, go: bool = False) -> str | None:
    """None when the line skips nothing; else what to add to it when it is shown."""
    stripped = text.strip()
    if go and GO_BUILD.match(stripped):
        return GO_BUILD_NOTE  # a comment to the eye, a switch to the compiler
    if stripped.startswith(("#", "//")) and not stripped.startswith("#["):
        return None  # a comment
    if ONLY.search(stripped):
        return ONLY_NOTE
    if SKIP.search(stripped) or NOT_A_TEST.match(stripped):
        return ""
    return "" if ruby and RUBY_SKIP.search(stripped) else None


def _loaders(diff: FileDiff) -> list[tuple[str, int, str, str]]:
    """The lines one test file's change added that decide which of its tests run."""
    return [(diff.new_path, line.number, TEST_CONFIG,
             f"{line.text.strip()} (decides which tests of the file run)")
            for hunk in diff.hunks for line in hunk.added if LOADERS.match(line.text.strip())]


def _asserts(text: str) -> bool:
    stripped = text.strip()
    return not stripped.startswith(("#", "//", "/*", "*")) and bool(ASSERTION.search(stripped))


def _norm(text: str) -> str:
    return " ".join(text.split())


def _clip(text: str, limit: int = TEXT_LIMIT) -> str:
    """text fit to be shown and stored: at most limit characters, no undecodable bytes."""
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def weakened(repo: Repo, base: str, commit: str,
             commands: Sequence[Sequence[str]]) -> list[Weakening]:
    """What commit did to the tests and their configuration since base (from their merge
    base, as `Repo.diff`); commands: the plan's test commands, whose test paths, scripts and
    configuration files count too. Raises what git raises."""
    files = diffs.parse(repo.line_diff(base, commit))
    watch = testconfig.watched(commands)
    return weakenings(files, named_paths(commands), watch, reader(repo, base, commit))


def reader(repo: Repo, base: str, commit: str) -> testconfig.Reader:
    """A file's text at the merge base of base and commit (OLD) or at commit (NEW), as git
    stores it (no filter, no textconv); None when it is not there or is bigger than
    CONFIG_LIMIT."""
    ends = {testconfig.NEW: commit}

    def read(side: str, path: str) -> str | None:
        if side not in ends:  # asked for once, and only when a file watched in parts changed
            status, out = run(repo.top, "merge-base", base, commit, check=False)
            ends[side] = out.strip() if status == 0 and out.strip() else base
        spec = f"{ends[side]}:{path}"
        status, size = run(repo.top, "cat-file", "-s", spec, check=False)
        if status != 0 or not size.strip().isdigit() or int(size) > CONFIG_LIMIT:
            return None
        status, text = run(repo.top, "cat-file", "blob", spec, check=False)
        return text if status == 0 else None

    return read


def with_fewer_tests(found: Sequence[Weakening], base: testcount.Count | None,
                     now: testcount.Count | None) -> list[Weakening]:
    """found, and when the gate ran fewer tests at the commit than at the base, and the tests
    found removed or skipped do not account for it, one more entry saying so (numbered after
    them), which every reviewer answers as the others. (A deleted test file may have held any
    number of tests: it accounts for any drop.)"""
    drop = testcount.fewer(base, now)
    shown = sum(1 for w in found if w.kind in (REMOVED_TEST, NEW_SKIP))
    if not drop or drop <= shown or any(w.kind == DELETED_FILE for w in found):
        return list(found)
    return [*found, Weakening(f"W{len(found) + 1}", "", 0, FEWER_TESTS,
                              _clip(testcount.compared(base, now)))]

"""The files that decide which tests run, and what a change did to them.

A gate is only as strong as the tests it runs, and which ones run is decided outside the test
files: `addopts = -k "not test_x"` in pytest.ini, a conftest.py hook that drops collected
items, `testPathIgnorePatterns` in jest.config.js. Every such change is shown to every
reviewer among the weakened tests (kind `test-config`, handoff.loop.weakened), and a review
must answer each one as it answers a removed test.

WATCHED is the one list of those files, each with why it counts. A file is watched whole, or
only in the parts that decide the tests (a pyproject.toml edit to the dependencies is no test
configuration): tables of a TOML file, sections of an INI file, keys of a JSON file, compared
by value at both ends of the change, so reformatting is not listed and a key moved to another
line is. A file that cannot be read as its format at one end (or is too big to) has every
changed line listed instead: handoff does not guess which part a line was in.

Pure and stdlib only: the caller reads the files (`Reader`).
"""

from __future__ import annotations

import configparser
import json
import posixpath
import re
import shlex
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from handoff.protocol.diffs import ADDED, DELETED, RENAMED, FileDiff

WHOLE, TOML, INI, JSON = "whole", "toml", "ini", "json"
#: the two ends of a change, as a `Reader` is asked for them
OLD, NEW = "old", "new"
#: (side, path) -> the file's text at that end; None when it is not there or is too big
Reader = Callable[[str, str], str | None]
#: changed lines a whole-file entry quotes before it says how many more there are
QUOTED = 6


@dataclass(frozen=True)
class Watched:
    """A file that decides which tests run. name: a glob of the file's name, at any depth (or,
    with a slash, its path from the top); parts: for TOML and JSON dotted keys (the key and
    everything under it), for INI section names, each segment a glob; none: the whole file."""

    name: str
    why: str
    form: str = WHOLE
    parts: tuple[str, ...] = ()


WATCHED: tuple[Watched, ...] = (
    Watched("pytest.ini", "pytest's configuration: `addopts` (-k, --deselect, --ignore, -p), "
            "`testpaths` and `python_files` decide what is collected and run"),
    Watched(".pytest.ini", "pytest's configuration, as pytest.ini"),
    Watched("pytest.toml", "pytest's configuration (pytest 9), as pytest.ini"),
    Watched(".pytest.toml", "pytest's configuration (pytest 9), as pytest.ini"),
    Watched("conftest.py", "pytest runs it before the tests beside and under it: its hooks "
            "deselect, skip or rewrite the outcome of any test"),
    Watched("pyproject.toml", "pytest's configuration there (`[tool.pytest.ini_options]`, "
            "pytest 9's `[tool.pytest]`)", TOML, ("tool.pytest",)),
    Watched("pyproject.toml", "a plugin the package registers for pytest runs in every run",
            TOML, ("project.entry-points.pytest11",)),
    Watched("pyproject.toml", "coverage's `omit` and `fail_under`: a gate that enforces coverage "
            "passes by leaving code out", TOML, ("tool.coverage",)),
    Watched("pyproject.toml", "what `tox`, `hatch test`, `pdm run` and `poe` run: the test "
            "environments and scripts", TOML,
            ("tool.tox", "tool.hatch.envs", "tool.pdm.scripts", "tool.poe")),
    Watched("setup.cfg", "pytest's and coverage's configuration there", INI,
            ("tool:pytest", "coverage:*")),
    Watched("tox.ini", "pytest's configuration there, and the commands of tox's test "
            "environments", INI, ("pytest", "tox", "testenv*", "coverage:*")),
    Watched(".coveragerc", "coverage's `omit` and `fail_under`, as in pyproject.toml"),
    Watched("noxfile.py", "nox's sessions are the test commands"),
    Watched("jest.config.*", "jest's `testMatch`, `testPathIgnorePatterns`, `setupFiles`"),
    Watched("vitest.config.*", "vitest's `include`, `exclude`, `setupFiles`"),
    Watched("vitest.workspace.*", "which projects vitest runs"),
    Watched("vite.config.*", "vitest reads its `test` options here when there is no "
            "vitest.config"),
    Watched("jest.setup.*", "runs before every test file (mocks, globals)"),
    Watched("vitest.setup.*", "runs before every test file (mocks, globals)"),
    Watched("setupTests.*", "runs before every test file (Create React App's convention)"),
    Watched("karma.conf.*", "karma's `files` and `exclude`"),
    Watched(".mocharc*", "mocha's `spec`, `ignore`, `grep`, `require`"),
    Watched("playwright.config.*", "playwright's `testDir`, `testIgnore`, `grep`"),
    Watched("cypress.config.*", "cypress's `specPattern`, `excludeSpecPattern`"),
    Watched("package.json", "jest's, mocha's, ava's, c8's and nyc's configuration there, and "
            "the test scripts `npm test` runs", JSON,
            ("jest", "mocha", "ava", "c8", "nyc", "scripts.test*", "scripts.pretest*",
             "scripts.posttest*")),
    Watched("phpunit.xml", "PHPUnit's test suites, excluded folders and groups"),
    Watched("phpunit.xml.dist", "PHPUnit's configuration, as phpunit.xml"),
    Watched("phpunit.dist.xml", "PHPUnit's configuration, as phpunit.xml"),
    Watched(".rspec", "RSpec's default options (`--tag ~slow` leaves examples out)"),
    Watched("spec_helper.rb", "`RSpec.configure` there filters which examples run"),
    Watched("rails_helper.rb", "`RSpec.configure` there filters which examples run"),
    Watched("Cargo.toml", "which test targets cargo builds (`[[test]]`, `test = false`, "
            "`autotests`), which `#[cfg(feature)]` tests compile (`[features]`) and which "
            "crates a workspace's `cargo test` covers", TOML,
            ("lib", "bin", "test", "features", "package.autotests", "workspace.members",
             "workspace.exclude", "workspace.default-members")),
)

#: programs that read a makefile or a justfile: when a plan's command runs one, its recipes
#: are the gate
MAKEFILES = {"make": ("Makefile", "makefile", "GNUmakefile", "*.mk"), "gmake": ("*akefile", "*.mk"),
             "just": ("justfile", "Justfile", ".justfile")}
#: package managers whose `run X` (or plain `X`) runs the script X of package.json
RUNNERS = {"npm", "pnpm", "yarn", "bun"}
#: the options that name a runner's configuration file (`-c` is a shell's script: not there)
CONFIG_OPTIONS = {"--config", "--config-file", "--configfile", "--rcfile", "-c"}
SHELLS = {"sh", "bash", "zsh", "dash", "ksh"}
#: what a file's name ends in when a command names it as configuration, not as code
CONFIG_ENDS = {"ini", "cfg", "toml", "json", "yaml", "yml", "xml", "conf"}


def watched(commands: Sequence[Sequence[str]] = ()) -> tuple[Watched, ...]:
    """WATCHED, and what the plan's test commands make part of the gate: the makefile of
    `make test`, the script of `npm run ci`, a configuration file named by `-c`/`--config`."""
    extra: list[Watched] = []
    for line in (line for argv in commands for line in _command_lines(argv)):
        programs = {posixpath.basename(w) for w in line}
        for program, names in MAKEFILES.items():
            if program in programs:
                extra += [Watched(n, f"the plan's commands run `{program}`: its recipes are "
                                     "the gate") for n in names]
        scripts = sorted(_scripts(line))
        if scripts:
            extra.append(Watched("package.json", "the plan's commands run these scripts", JSON,
                                 tuple(f"scripts.{s}" for s in scripts)))
        extra += [Watched(path, "the plan's commands name it as configuration")
                  for path in _config_files(line)]
    return (*WATCHED, *extra)


def _command_lines(argv: Sequence[str]) -> list[list[str]]:
    """argv, and each argument that is itself a command line (`sh -c "make test"`), split."""
    lines = [list(argv)]
    for arg in argv:
        if " " in arg:
            try:
                lines.append(shlex.split(arg))
            except ValueError:
                continue  # unbalanced quotes: no command line
    return lines


def _scripts(words: Sequence[str]) -> set[str]:
    """The package.json scripts a command line runs: `npm run X`, `yarn X`, `pnpm X`."""
    found: set[str] = set()
    for i, word in enumerate(words[:-1]):
        program = posixpath.basename(word)
        if program not in RUNNERS:
            continue
        rest = [w for w in words[i + 1:] if not w.startswith("-")]
        if len(rest) >= 2 and rest[0] in ("run", "run-script"):
            found.add(rest[1])
        elif rest and program != "npm" and rest[0] not in ("run", "install", "add", "exec",
                                                           "x", "dlx"):
            found.add(rest[0])  # `yarn ci`, `pnpm ci`: a script's name on its own
    return found


def _config_files(argv: Sequence[str]) -> list[str]:
    """The relative paths a command names as configuration: the value of a config option, or
    an argument whose name ends as a configuration file's does."""
    found: list[str] = []
    shell = bool(argv) and posixpath.basename(argv[0]) in SHELLS
    for before, arg in zip(["", *argv], argv, strict=False):
        option, _, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        option_value = before in CONFIG_OPTIONS and not (before == "-c" and shell)
        # a file's name, not a command line a shell runs (`sh -c "pytest -c x.ini"`: its
        # words are read as a line of their own)
        named = not arg.startswith("-") and not any(c.isspace() for c in arg) \
            and "." in arg and arg.rsplit(".", 1)[-1] in CONFIG_ENDS
        if option in CONFIG_OPTIONS and value:
            found.append(value)
        elif option_value or named:
            found.append(arg)
    paths = [posixpath.normpath(p) for p in found if p and not p.startswith(("/", "~"))]
    return [p for p in paths if p != "." and not p.startswith("../")]


def applies(watch: Watched, path: str) -> bool:
    if "/" in watch.name:
        return path == watch.name
    return fnmatchcase(path.rsplit("/", 1)[-1], watch.name)


def changes(files: Sequence[FileDiff], watch: Sequence[Watched],
            read: Reader | None) -> list[tuple[str, int, str]]:
    """(file, line, what changed) for each watched file, or watched part of one, that the
    change touched. line: where to look at the commit (0: the file as a whole, or a part that
    only lost lines)."""
    found: list[tuple[str, int, str]] = []
    for diff in files:
        was = [w for w in watch if diff.old_path and applies(w, diff.old_path)]
        now = [w for w in watch if diff.new_path and applies(w, diff.new_path)]
        if not was and not now:
            continue
        if diff.status == RENAMED and was and not now:
            # conftest.py renamed to conftest_off.py: its hooks are gone, as if deleted
            found.append((diff.old_path, 0, f"renamed to {diff.new_path}: no longer read"))
            continue
        rules = now or was
        if any(w.form == WHOLE for w in rules):
            found.append((diff.path, _first_line(diff), _whole(diff)))
            continue
        form = rules[0].form
        parts = _parts(diff, [w for w in rules if w.form == form], read)
        if parts is None:  # not readable as its format at one end: every changed line
            found.append((diff.path, _first_line(diff),
                          f"(not read as {form.upper()}) {_whole(diff)}"))
        else:
            found += [(diff.path, line, text) for line, text in parts]
    return found


def _first_line(diff: FileDiff) -> int:
    added = [line.number for hunk in diff.hunks for line in hunk.added]
    return min(added) if added else 0


def _whole(diff: FileDiff) -> str:
    """What a change did to a watched file, in its own lines (the first few of them)."""
    if diff.status == DELETED:
        return "file deleted"
    lines = [f"{mark}{line.text.strip()}" for hunk in diff.hunks
             for mark, side in (("-", hunk.removed), ("+", hunk.added)) for line in side
             if line.text.strip()]
    head = {ADDED: "new file", RENAMED: f"renamed from {diff.old_path}"}.get(diff.status, "")
    more = f" … ({len(lines) - QUOTED} more changed lines)" if len(lines) > QUOTED else ""
    quoted = " | ".join(lines[:QUOTED]) + more
    return f"{head}: {quoted}" if head and quoted else head or quoted or "changed (mode only)"


# ---- watched parts of a TOML, INI or JSON file ---------------------------------------------

Key = tuple[str, ...]


def _parts(diff: FileDiff, rules: Sequence[Watched],
           read: Reader | None) -> list[tuple[int, str]] | None:
    """(line, what changed) for each watched part whose values differ at the two ends; None
    when an end that exists cannot be read."""
    form = rules[0].form
    ends: list[dict[Key, str]] = []
    for side, path, present in ((OLD, diff.old_path, diff.status != ADDED),
                                (NEW, diff.new_path, diff.status != DELETED)):
        if not present or not path:
            ends.append({})
            continue
        text = read(side, path) if read is not None else None
        values = None if text is None else _flat(form, text)
        if values is None:
            return None
        ends.append(values)
    old, new = ends
    found: list[tuple[int, str]] = []
    seen: set[Key] = set()
    for rule in rules:
        for part in rule.parts:
            want = tuple(part.split(".")) if form != INI else (part,)
            keys = sorted(k for k in {*old, *new} - seen if _under(k, want)
                          and old.get(k) != new.get(k))
            if not keys:
                continue
            seen.update(keys)
            said = "; ".join(_change(form, k, old.get(k), new.get(k)) for k in keys)
            found.append((_line_of(diff, keys), said))
    return found


def _under(key: Key, part: Key) -> bool:
    return len(key) >= len(part) and all(fnmatchcase(k, p) for k, p in zip(key, part,
                                                                             strict=False))


def _change(form: str, key: Key, old: str | None, new: str | None) -> str:
    name = f"[{key[0]}] {'.'.join(key[1:])}" if form == INI else ".".join(key)
    return f"{name}: {'(none)' if old is None else old} → {'(none)' if new is None else new}"


def _line_of(diff: FileDiff, keys: Iterable[Key]) -> int:
    """The first line the change added that names one of keys' last segments (0: none)."""
    leaves = {key[-1] for key in keys if key and not key[-1].isdigit()}
    for hunk in diff.hunks:
        for line in hunk.added:
            if any(re.search(rf"(?<![\w-]){re.escape(leaf)}(?![\w-])", line.text)
                   for leaf in leaves):
                return line.number
    return 0


def _flat(form: str, text: str) -> dict[Key, str] | None:
    """Every value of the file, by its key path, as JSON text; None when text is not the
    form it should be."""
    try:
        if form == TOML:
            return _flatten(tomllib.loads(text), ())
        if form == JSON:
            data = json.loads(text)
            return _flatten(data, ()) if isinstance(data, dict) else None
        return _ini(text)
    except (ValueError, RecursionError, configparser.Error):  # tomllib's and json's are ValueErrors
        return None


def _flatten(value: Any, key: Key) -> dict[Key, str]:
    """A tree of tables as its leaves; a list holding a table (TOML's `[[test]]`) is a tree
    too, by index, so one target's change names that target."""
    if isinstance(value, Mapping):
        found: dict[Key, str] = {}
        for name, inner in value.items():
            found.update(_flatten(inner, (*key, str(name))))
        return found if found or not key else {key: "{}"}
    if isinstance(value, list) and any(isinstance(v, Mapping) for v in value):
        found = {}
        for i, inner in enumerate(value):
            found.update(_flatten(inner, (*key, str(i))))
        return found
    return {key: json.dumps(value, ensure_ascii=False, default=str)}


def _ini(text: str) -> dict[Key, str]:
    # no interpolation, no DEFAULT section of configparser's own, names as written: the file
    # is read as pytest and tox read it, not as configparser would rewrite it
    parser = configparser.RawConfigParser(strict=False, interpolation=None,
                                          default_section="\0", delimiters=("=", ":"))
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(text)
    found: dict[Key, str] = {}
    for section in parser.sections():
        options = parser.items(section)
        found.update({(section, name): json.dumps(value, ensure_ascii=False)
                      for name, value in options})
        if not options:
            found[(section,)] = "{}"
    return found

"""handoff.loop.testconfig: the files that decide which tests run, and what a change did to
them (each change is a `test-config` entry among the weakened tests a review must answer)."""

from __future__ import annotations

from handoff.loop.testconfig import WATCHED, Watched, applies, watched
from tests.paths import ROOT


def test_every_watched_file_is_in_the_protocol_docs() -> None:
    """docs/protocol.md's table of test configuration names every file WATCHED names."""
    docs = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
    section = docs[docs.index("**Test configuration**"):docs.index("**Fewer tests**")]
    assert [w.name for w in WATCHED if f"`{w.name}`" not in section] == []


def extra(commands: list[list[str]]) -> list[tuple[str, tuple[str, ...]]]:
    """What the plan's commands add to WATCHED: (name, parts) of each."""
    return [(w.name, w.parts) for w in watched(commands)[len(WATCHED):]]


def test_what_a_command_line_makes_part_of_the_gate() -> None:
    assert watched() == WATCHED
    assert extra([["pytest", "-q"], ["cargo", "test"]]) == []
    assert extra([["just", "check"]]) == [("justfile", ()), ("Justfile", ()), (".justfile", ())]
    assert extra([["npm", "run", "ci", "--", "-x"]]) == [("package.json", ("scripts.ci",))]
    assert extra([["yarn", "ci"]]) == [("package.json", ("scripts.ci",))]
    assert extra([["npm", "ci"]]) == [], "npm ci installs: it runs no script"
    assert extra([["pnpm", "install"]]) == []
    assert extra([["pytest", "--config-file=ci/a.ini"], ["mocha", "--config", "m.json"],
                  ["tox", "-c", "ci/tox.ini"]]) == [
        ("ci/a.ini", ()), ("m.json", ()), ("ci/tox.ini", ())]
    assert extra([["bash", "-c", "pytest -c ./cfg/p.ini -q"]]) == [("cfg/p.ini", ())], \
        "a shell's -c is its script, whose own -c names a file"
    assert extra([["pytest", "-c", "/etc/p.ini"], ["pytest", "-c", "../up.ini"]]) == [], \
        "only files of the repository"
    assert extra([["sh", "-c", "pytest 'unbalanced"]]) == []
    assert extra([["sh", "-c", "pytest -q -c x.ini"]]) == [("x.ini", ())], \
        "a shell's script that ends as a file name does is no file"


def test_a_watched_name_is_a_files_name_at_any_depth_or_with_a_slash_its_path() -> None:
    conftest = next(w for w in WATCHED if w.name == "conftest.py")
    assert applies(conftest, "conftest.py") and applies(conftest, "a/b/conftest.py")
    assert not applies(conftest, "a/conftest.py.bak")
    jest = next(w for w in WATCHED if w.name == "jest.config.*")
    assert applies(jest, "web/jest.config.ts") and not applies(jest, "web/jest.configs")
    named = Watched("ci/checks.ini", "named")
    assert applies(named, "ci/checks.ini") and not applies(named, "other/ci/checks.ini")

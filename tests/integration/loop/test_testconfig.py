"""handoff.loop.testconfig: the files that decide which tests run, and what a change did to
them (each change is a `test-config` entry among the weakened tests a review must answer)."""

from __future__ import annotations

import json
from pathlib import Path

from handoff.loop.testconfig import WATCHED, changes
from handoff.protocol.diffs import FileDiff
from handoff.protocol.diffs import parse as parse_diff
from tests.conftest import git
from tests.unit.loop import test_weakened
from tests.unit.loop.test_weakened import PYPROJECT, commit, rows

#: the repository with tests/test_shop.py committed (test_weakened's fixture)
shop = test_weakened.shop


def test_a_pytest_ini_that_deselects_a_test_is_listed(shop: tuple[Path, str]) -> None:
    """The case of issue 32: a committed pytest.ini with `-k "not test_x"` weakened nothing a
    test file shows."""
    repo, base = shop
    commit(repo, {"pytest.ini": '[pytest]\naddopts = -k "not test_one"\n'})
    assert rows(repo, base) == [("W1", "test-config", "pytest.ini", 1,
                                 'new file: +[pytest] | +addopts = -k "not test_one"')]


def test_a_conftest_that_drops_collected_items_is_listed(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"tests/conftest.py": "def pytest_collection_modifyitems(items):\n"
                                       "    items[:] = items[:1]\n"})
    assert rows(repo, base) == [
        ("W1", "test-config", "tests/conftest.py", 1, "new file: +def "
         "pytest_collection_modifyitems(items): | +items[:] = items[:1]")]
    # renamed out of pytest's sight, its hooks and fixtures are gone as if deleted
    base = git(repo, "rev-parse", "HEAD")
    git(repo, "mv", "tests/conftest.py", "tests/conftest_off.py")
    git(repo, "commit", "-q", "-m", "away")
    assert rows(repo, base) == [("W1", "test-config", "tests/conftest.py", 0,
                                 "renamed to tests/conftest_off.py: no longer read")]


def test_pyproject_counts_only_for_its_test_tables(repo: Path) -> None:
    base = commit(repo, {"pyproject.toml": PYPROJECT})
    # a dependency, another tool's table, and the same values written another way: nothing
    commit(repo, {"pyproject.toml": PYPROJECT.replace('["requests"]', '["requests", "attrs"]')
                  .replace("line-length = 100", "line-length = 120")
                  .replace('addopts = "-q"', "addopts = '-q'  # quiet")})
    assert rows(repo, base) == []
    commit(repo, {"pyproject.toml": PYPROJECT.replace(
        'addopts = "-q"', 'addopts = "-q --deselect tests/test_shop.py::test_one"')})
    assert rows(repo, base) == [
        ("W1", "test-config", "pyproject.toml", 6, 'tool.pytest.ini_options.addopts: "-q" → '
         '"-q --deselect tests/test_shop.py::test_one"')]


def test_pyproject_dotted_keys_and_a_registered_plugin(repo: Path) -> None:
    """No section header to find: the value is compared, wherever it is written."""
    base = commit(repo, {"pyproject.toml": '[project]\nname = "shop"\n'})
    commit(repo, {"pyproject.toml": '[project]\nname = "shop"\n'
                  'entry-points.pytest11 = { skipper = "shop.skipper" }\n\n'
                  '[tool]\npytest.ini_options.testpaths = ["docs"]\n'})
    assert rows(repo, base) == [
        ("W1", "test-config", "pyproject.toml", 3,
         'project.entry-points.pytest11.skipper: (none) → "shop.skipper"'),
        ("W2", "test-config", "pyproject.toml", 6,
         'tool.pytest.ini_options.testpaths: (none) → ["docs"]')]


def test_a_file_that_does_not_read_as_its_format_has_every_line_listed(repo: Path) -> None:
    base = commit(repo, {"pyproject.toml": PYPROJECT})
    commit(repo, {"pyproject.toml": PYPROJECT.replace("[tool.ruff]", "[tool.ruff")})
    assert rows(repo, base) == [("W1", "test-config", "pyproject.toml", 9,
                                 "(not read as TOML) -[tool.ruff] | +[tool.ruff")]


def test_ini_files_count_for_their_test_sections(repo: Path) -> None:
    base = commit(repo, {
        "setup.cfg": "[metadata]\nname = shop\n\n[tool:pytest]\naddopts = -q\n",
        "tox.ini": "[tox]\nenvlist = py311\n\n[testenv]\ncommands = pytest\n\n"
                   "[flake8]\nmax-line-length = 100\n"})
    commit(repo, {
        "setup.cfg": "[metadata]\nname = shop2\n\n[tool:pytest]\naddopts = -q\n"
                     "    --ignore=tests/test_shop.py\n",
        "tox.ini": "[tox]\nenvlist = py311\n\n[testenv]\ncommands = pytest tests/test_a.py\n\n"
                   "[flake8]\nmax-line-length = 120\n"})
    assert rows(repo, base) == [
        ("W1", "test-config", "setup.cfg", 0,
         '[tool:pytest] addopts: "-q" → "-q\\n--ignore=tests/test_shop.py"'),
        ("W2", "test-config", "tox.ini", 5,
         '[testenv] commands: "pytest" → "pytest tests/test_a.py"')]


def test_package_json_counts_for_its_test_keys_and_the_scripts_the_plan_runs(
        repo: Path) -> None:
    before = {"name": "shop", "scripts": {"test": "jest", "ci": "jest --ci", "build": "tsc"},
              "jest": {"testMatch": ["**/*.test.js"]}, "dependencies": {"left-pad": "1.0.0"}}
    base = commit(repo, {"package.json": json.dumps(before, indent=2) + "\n"})
    after = {**before, "scripts": {"test": "jest", "ci": "jest --ci -t add", "build": "tsc -b"},
             "jest": {"testMatch": ["**/*.test.js"], "testPathIgnorePatterns": ["shop"]},
             "dependencies": {"left-pad": "1.1.0"}}
    commit(repo, {"package.json": json.dumps(after, indent=2) + "\n"})
    # json.dumps(indent=2) puts testPathIgnorePatterns on line 12, "ci" on line 5
    assert rows(repo, base) == [("W1", "test-config", "package.json", 12,
                                 'jest.testPathIgnorePatterns: (none) → ["shop"]')]
    assert rows(repo, base, [["npm", "run", "ci"]]) == [  # by line, as every entry
        ("W1", "test-config", "package.json", 5, 'scripts.ci: "jest --ci" → "jest --ci -t add"'),
        ("W2", "test-config", "package.json", 12,
         'jest.testPathIgnorePatterns: (none) → ["shop"]')]


def test_cargo_toml_counts_for_its_test_targets_not_its_dependencies(repo: Path) -> None:
    manifest = '[package]\nname = "calc"\nversion = "0.1.0"\n\n[dependencies]\nrand = "0.8"\n'
    base = commit(repo, {"Cargo.toml": manifest})
    commit(repo, {"Cargo.toml": manifest.replace('"0.8"', '"0.9"')
                  + '\n[lib]\ntest = false\n\n[[test]]\nname = "it"\nharness = false\n'})
    assert rows(repo, base) == [
        ("W1", "test-config", "Cargo.toml", 9, "lib.test: (none) → false"),
        # a part's keys in name order
        ("W2", "test-config", "Cargo.toml", 12, "test.0.harness: (none) → false; "
         'test.0.name: (none) → "it"')]


def test_what_the_plan_s_commands_run_and_name_is_watched(shop: tuple[Path, str]) -> None:
    repo, base = shop
    commit(repo, {"Makefile": "test:\n\tpytest -k 'not one'\n",
                  "ci/checks.ini": "[pytest]\naddopts = -x\n"})
    assert rows(repo, base) == []  # neither is known to decide the tests
    assert rows(repo, base, [["make", "test"], ["pytest", "-c", "ci/checks.ini"]]) == [
        ("W1", "test-config", "Makefile", 1, "new file: +test: | +pytest -k 'not one'"),
        ("W2", "test-config", "ci/checks.ini", 1, "new file: +[pytest] | +addopts = -x")]
    assert rows(repo, base, [["sh", "-c", "make test"]])[0][2] == "Makefile"


def diff_of(repo: Path, base: str) -> list[FileDiff]:
    return parse_diff(git(repo, "diff", "-U0", "--no-renames", base, "HEAD"))


def test_changes_reads_each_end_through_its_reader(repo: Path) -> None:
    """A part is compared by value at both ends: without a reader to give them, every changed
    line of the file is listed (handoff does not guess which part a line was in)."""
    base = commit(repo, {"pyproject.toml": PYPROJECT})
    commit(repo, {"pyproject.toml": PYPROJECT.replace('"-q"', '"-q -x"')})
    files = diff_of(repo, base)
    ends = {"old": PYPROJECT, "new": PYPROJECT.replace('"-q"', '"-q -x"')}
    asked: list[tuple[str, str]] = []

    def read(side: str, path: str) -> str | None:
        asked.append((side, path))
        return ends[side]

    assert changes(files, WATCHED, read) == [
        ("pyproject.toml", 6, 'tool.pytest.ini_options.addopts: "-q" → "-q -x"')]
    assert sorted(set(asked)) == [("new", "pyproject.toml"), ("old", "pyproject.toml")]
    assert changes(files, WATCHED, None) == [
        ("pyproject.toml", 6, '(not read as TOML) -addopts = "-q" | +addopts = "-q -x"')]
    assert changes(files, [], read) == [], "nothing watched, nothing listed"

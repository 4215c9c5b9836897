"""`handoff finish` tests what it merges: two passed tickets whose merge is textually clean but
broken are refused with the base unmoved, and a train of tickets is merged once, tested once,
and cut at the ticket that breaks it. Real git, real tmux, the scripted peers, the real CLI."""

from __future__ import annotations

from pathlib import Path

from handoff.operations.train import Check, first_breaking
from tests.conftest import commit_file, git
from tests.harness import ALL_TESTS, handoff, plan_text, write_plan

#: calc with its bugs fixed, and a table of its operations (one entry a line, no trailing
#: comma: two tickets that each add an entry, merged line by line, forget a comma)
FIXED = '''\
def add(a: int, b: int) -> int:
    return a + b


def mul(a: int, b: int) -> int:
    return a * b


def neg(a: int) -> int:
    return -a


OPS = {
    "add": add,
    "mul": mul
}
'''
#: neg renamed, its callers with it: clean against any change that does not call it ...
RENAME_NEG = [{"file": "calc.py", "replace": "def neg(", "with": "def negate("},
              {"file": "tests/test_calc.py", "replace": "neg", "with": "negate"}]
#: ... and a new test module that does call it: each passes alone, together they do not import
USES_NEG = {"file": "tests/test_twice.py", "content": (
    "import unittest\n\nfrom calc import neg\n\n\nclass TwiceTest(unittest.TestCase):\n"
    "    def test_twice(self) -> None:\n        self.assertEqual(neg(neg(3)), 3)\n")}
NOTES = {"file": "NOTES.md", "content": "what changed\n"}
DISCOVER = [*ALL_TESTS[:3], "discover", "-s", "tests", "-t", "."]


def fixed_base(repo: Path, union: bool = False) -> str:
    """main with calc fixed (its tests pass), and calc.py merged line by line (union)."""
    commit_file(repo, "calc.py", FIXED, "calc fixed")
    if union:
        return commit_file(repo, ".gitattributes", "calc.py merge=union\n",
                           "calc.py is merged line by line")
    return git(repo, "rev-parse", "HEAD")


def pass_ticket(repo: Path, tmp_path: Path, ticket: str, edits: list[dict[str, str]],
                test: list[str] = ALL_TESTS) -> str:
    plan = write_plan(tmp_path, plan_text({1: {"edits": edits}}, test=test), f"{ticket}.md")
    done = handoff("start", ticket, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                   timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(git(repo, "rev-parse", f"handoff/{ticket}"))


def finish(repo: Path, *args: str) -> tuple[int, str]:
    done = handoff("finish", *args, cwd=repo, timeout=180)
    return done.returncode, done.stdout + done.stderr


def first_parents(repo: Path, since: str) -> list[str]:
    return git(repo, "rev-list", "--first-parent", f"{since}..main").split()


def verdicts(*results: str) -> dict[int, Check]:
    return {i: Check(f"c{i}", i, result, "") for i, result in enumerate(results)}


def test_first_breaking_bisects_the_prefixes_testing_each_once() -> None:
    # prefixes 1..5 of five links: the first three pass, the fourth breaks it
    known = verdicts("passed", "passed", "passed", "passed", "failed", "failed")
    asked: list[int] = []

    def run(count: int) -> Check:
        asked.append(count)
        return known[count]

    good_count, good, bad = first_breaking([object()] * 5, known[5], run)  # type: ignore[list-item]
    assert (good_count, bad.count) == (3, 4) and good is known[3]
    assert len(asked) == len(set(asked)) <= 3, asked
    # the first link breaks it: nothing passes
    asked.clear()
    first = verdicts("passed", "failed", "failed", "failed")
    good_count, good, bad = first_breaking([object()] * 3, first[3], lambda n: first[n])  # type: ignore[list-item]
    assert (good_count, good, bad.count) == (0, None, 1)

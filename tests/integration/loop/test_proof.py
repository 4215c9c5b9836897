"""handoff.loop.proof: after a round's gate passed, each test the ticket added or changed runs at
the base with the change's test files laid over it. A real failing-first test passes silently
as proof; a vacuous one (it passes at the base too) is listed to every reviewer, whose pass
must answer it; a test that imports what the change adds cannot run there, and is said so.
Real git, real tmux, the scripted agents, the real unittest and pytest in the gate's fence."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from tests.conftest import PYTHON, git, unittest_argv
from tests.harness import (
    FIX_ADD,
    events,
    final_report,
    handoff,
    plan_text,
    state,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)
from tests.loop_tickets import team

#: round 1: add() fixed, sub() added, and three tests: one that fails at the base (add(1, 1)
#: is 0 there), one that passes there too (add(0, 0) is 0 either way), and one in a new file
#: that imports sub(), which the base does not have
TESTS_ADDED = {"file": "tests/test_calc.py",
               "replace": "        self.assertEqual(add(2, 3), 5)\n",
               "with": "        self.assertEqual(add(2, 3), 5)\n\n"
                       "    def test_add_one(self) -> None:\n"
                       "        self.assertEqual(add(1, 1), 2)\n\n"
                       "    def test_add_zero(self) -> None:\n"
                       "        self.assertEqual(add(0, 0), 0)\n"}
SUB = {"file": "calc.py", "replace": "def mul(", "with": "def sub(a: int, b: int) -> int:\n"
                                                        "    return a - b\n\n\ndef mul("}
SUB_TEST = {"file": "tests/test_sub.py",
            "content": "import unittest\n\nfrom calc import sub\n\n\n"
                       "class SubTest(unittest.TestCase):\n"
                       "    def test_sub(self) -> None:\n"
                       "        self.assertEqual(sub(3, 2), 1)\n"}
ROUND = [FIX_ADD, SUB, TESTS_ADDED, SUB_TEST]
ONE = "tests/test_calc.py::AddTest::test_add_one"
ZERO = "tests/test_calc.py::AddTest::test_add_zero"
SUBS = "tests/test_sub.py::SubTest::test_sub"


def test_a_testers_vacuous_test_is_listed_and_a_pass_that_ignores_it_is_refused(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """The implementer fixes add() and adds sub() with its test; the tester adds the two add
    tests on its commit."""
    team(repo, tester={"provider": "scripted"})
    text = plan_text({1: {"edits": [FIX_ADD, SUB, SUB_TEST], "tester": {"edits": [TESTS_ADDED]},
                          "reviewer": {"ignore_unproven": True}}},
                     test=unittest_argv("tests.test_calc.AddTest", "tests.test_sub"))
    assert handoff("start", "P-1", "--plan", str(write_plan(tmp_path, text)), "--yes",
                   cwd=repo).returncode == 0
    asked = wait_phase(handoff_home, "P-1", "needs-human", "passed", "escalated", timeout=120)

    proofs = {t["name"]: (t["outcome"], t.get("id")) for t in
              state(handoff_home, "P-1")["proofs"]["1"]["tests"]}
    assert proofs == {"test_add_one": ("fails on base", None),
                      "test_add_zero": ("passes on base", "P1"),
                      "test_sub": ("cannot run on base", None)}
    brief = (ticket_path(handoff_home, "P-1") / "inbox" / "reviewer" / "brief-1.md").read_text()
    section = brief.split("## New tests that pass without the change", 1)[1].split("\n## ")[0]
    assert f"`P1` `{ZERO}` passes at the base too" in section
    assert "test_add_one" not in section, "a failing-first test is proof, not a question"
    assert f"`{SUBS}`: cannot run on base (its module does not import at the base)" in brief
    refused = [p for e in events(handoff_home, "P-1")
               if e["kind"] == "submission" and e.get("accepted") is False
               for p in e.get("problems", [])]
    assert any("unproven test P1 is not answered" in p for p in refused), refused
    assert asked["phase"] == "needs-human", "a pass that ignores it is never taken"
    handoff("stop", "P-1", cwd=repo)


def test_pytest_proves_each_test_and_the_report_and_the_bundle_say_which(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """pytest stops a run whose named file does not collect: the run is made again without it."""
    pytest = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
              "tests/test_calc.py::AddTest", "tests/test_sub.py"]
    text = plan_text({1: {"edits": ROUND}}, test=pytest)
    assert handoff("start", "P-2", "--plan", str(write_plan(tmp_path, text)), "--yes",
                   cwd=repo).returncode == 0
    done = wait_phase(handoff_home, "P-2", "passed", "needs-human", "escalated", timeout=120)
    assert done["phase"] == "passed", done

    folder = ticket_path(handoff_home, "P-2")
    tests = {t["name"]: t for t in done["proofs"]["1"]["tests"]}
    assert tests["test_add_one"]["outcome"] == "fails on base"
    assert "AssertionError" in tests["test_add_one"]["why"]
    assert (tests["test_add_zero"]["outcome"], tests["test_add_zero"]["id"]) == \
        ("passes on base", "P1")
    assert tests["test_sub"]["outcome"] == "cannot run on base"
    assert tests["test_sub"]["why"].startswith("ImportError: cannot import name 'sub'")
    assert (folder / "proof-1-1.log").exists() and (folder / "proof-1-2.log").exists(), \
        "the second run left out the file that did not collect"
    assert not list((folder / "transcripts").glob("gate-scratch-*")), \
        "the overlay is handoff's own: no peer's scratch to keep"
    report = final_report(handoff_home, "P-2")
    assert f"`{ONE}`: fails on base, passes on the change" in report
    assert f"P1 `{ZERO}`: passes on base" in report
    assert f"`{SUBS}`: cannot run on base" in report
    wait_event(handoff_home, "P-2", "evidence")
    [bundle] = folder.glob("evidence-*.tar")
    with tarfile.open(bundle) as tar:
        member = tar.extractfile("manifest.json")
        assert member is not None
        manifest = json.loads(member.read())
    assert [t["outcome"] for t in manifest["proof"]["tests"]] == [
        "fails on base", "passes on base", "cannot run on base"]
    proof = [e for e in events(handoff_home, "P-2") if e["kind"] == "proof"]
    assert [len(e["tests"]) for e in proof] == [3] and proof[0]["reused"] is False


def test_prove_mutants_runs_the_new_tests_against_mutations_and_names_the_survivors(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """add()'s fix and sub() are pinned by their tests; the new STEP constant is not."""
    step = {"file": "calc.py", "replace": "def neg(", "with": "STEP = 1\n\n\ndef neg("}
    text = plan_text({1: {"edits": [*ROUND, step]}}, prove="mutants",
                     test=unittest_argv("tests.test_calc.AddTest", "tests.test_sub"))
    assert handoff("start", "P-3", "--plan", str(write_plan(tmp_path, text)), "--yes",
                   cwd=repo).returncode == 0
    done = wait_phase(handoff_home, "P-3", "passed", "needs-human", "escalated", timeout=120)
    assert done["phase"] == "passed", done

    said = done["proofs"]["1"]["mutants"]
    # the lines the change added: add()'s `return a + b` and STEP (git's diff keeps the base's
    # `return a - b`, add()'s old body, as sub()'s: it is no added line)
    assert git(repo, "diff", "-U0", "main", "handoff/P-3", "--", "calc.py").count("\n+    return") == 1
    assert (said["tried"], said["caught"]) == (2, 1), said
    [survivor] = said["survived"]
    assert (survivor["file"], survivor["was"], survivor["now"]) == \
        ("calc.py", "STEP = 1", "STEP = 2")
    folder = ticket_path(handoff_home, "P-3")
    brief = (folder / "inbox" / "reviewer" / "brief-1.md").read_text()
    line = f"calc.py:{survivor['line']} `STEP = 2`"
    assert "## Mutants of the changed lines" in brief and line in brief
    assert f"the new tests caught 1 of 2; survived: {line}" in final_report(handoff_home, "P-3")
    assert (repo / "calc.py").read_text().count("STEP") == 0, "the person's checkout untouched"
    assert "STEP = 1" in git(repo, "show", "handoff/P-3:calc.py"), "the commit as it was"

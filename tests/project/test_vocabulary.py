"""The loop's words are written once: a phase, a verdict, a report's status, a gate's outcome, a
doctor line's level, a monitor's action and a scanner's state are enums (handoff.phases,
handoff.verdicts, and the enums beside their one user), and no module of handoff/ spells one as
a bare string where it judges by it: compares with it, passes it as that word's argument, or
keys a table by it. mypy then checks every use."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from handoff.loop.monitor import Action
from handoff.loop.scanners import ScanState
from handoff.phases import Phase
from handoff.providers.base import Level
from handoff.verdicts import GateOutcome, Status, Verdict
from tests.paths import ROOT

PACKAGE = ROOT / "handoff"

#: each vocabulary: its words, and the names (in the code around a literal) that say a word of
#: it is meant
VOCABULARIES: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "phase": (frozenset(Phase), ("phase", "queued_for", "after_answer", "outcome")),
    "verdict": (frozenset(Verdict) | frozenset(GateOutcome), ("verdict", "gate")),
    "status": (frozenset(Status), ("status",)),
    "level": (frozenset(Level), ("level",)),
    "action": (frozenset(Action), ("action",)),
    "scan state": (frozenset(ScanState), ("scan", "state")),
}
#: where each vocabulary is defined (its words are spelled there, once)
DEFINITIONS = {"phases.py", "verdicts.py"}


def _names(node: ast.AST) -> str:
    """The identifiers and string keys of an expression, lowercased (`row["phase"]`,
    `state.phase`, `report.verdict`)."""
    words = [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]
    words += [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)]
    words += [n.value for n in ast.walk(node)
              if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return " ".join(words).lower()


def _strings(node: ast.AST) -> Iterator[ast.Constant]:
    """The string constants of a compared side: itself, or the items of a tuple, list or set."""
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    for item in items:
        if isinstance(item, ast.Constant) and isinstance(item.value, str):
            yield item


def bare(tree: ast.AST) -> Iterator[tuple[int, str, str]]:
    """(line, vocabulary, word) of every bare word of a vocabulary where code judges by it."""
    enum_bodies = {id(n) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                   for n in ast.walk(c) if any(_enum_base(b) for b in c.bases)}
    for node in ast.walk(tree):
        if id(node) in enum_bodies:
            continue
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            for side in sides:
                around = " ".join(_names(s) for s in sides if s is not side)
                for const in _strings(side):
                    yield from _judged(const, around)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "move":  # TicketDir.move(state, phase, ...)
            for arg in node.args:
                for const in _strings(arg):
                    yield from _judged(const, "phase", exact=True)
        elif isinstance(node, ast.keyword) and node.arg:
            for const in _strings(node.value):
                yield from _judged(const, node.arg.lower(), exact=True)
        elif isinstance(node, ast.Dict) and node.keys and all(
                isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            for name, (words, _) in VOCABULARIES.items():
                if len(keys) > 1 and keys <= words and name in ("phase", "verdict"):
                    yield node.lineno, name, ", ".join(sorted(str(k) for k in keys))


def _judged(const: ast.Constant, around: str, exact: bool = False) -> Iterator[tuple[int, str, str]]:
    for name, (words, hints) in VOCABULARIES.items():
        if const.value not in words:
            continue
        if (around in hints) if exact else any(hint in around for hint in hints):
            yield const.lineno, name, str(const.value)


def _enum_base(base: ast.expr) -> bool:
    return isinstance(base, ast.Name) and base.id in ("StrEnum", "Enum")


def test_no_bare_word_of_the_vocabularies_outside_their_definitions() -> None:
    found = sorted({f"{path.relative_to(ROOT)}:{line}: bare {word!r}"
                    for path in sorted(PACKAGE.rglob("*.py")) if path.name not in DEFINITIONS
                    for line, _, word in bare(ast.parse(path.read_text(encoding="utf-8")))})
    assert not found, "spell these with their enum:\n" + "\n".join(found)


def test_the_check_sees_a_planted_bare_word_in_each_position() -> None:
    planted = '''
if state.phase == "needs-human": pass
if row["phase"] in ("closed", "passed"): pass
if report.verdict != "pass": pass
ws.tdir.move(state, "closed", reason="x", phase="reviewing")
check = Check(level="FAIL")
HINT = {"passed": "finish it", "escalated": "resume it"}
if decision.action == "nudge": pass
if scan.state == "failed": pass
'''
    found = {(line, name) for line, name, _ in bare(ast.parse(planted))}
    assert {line for line, name, word in bare(ast.parse(planted)) if word == "closed"} == {3, 5}
    assert found >= {(2, "phase"), (3, "phase"), (4, "verdict"), (5, "phase"), (6, "level"),
                     (7, "phase"), (8, "action"), (9, "scan state")}, found


def test_the_same_words_elsewhere_are_not_flagged() -> None:
    """Event kinds, a test runner's words and prose are not the loop's vocabulary."""
    fine = '''
events.append("waiting", reason="x")
WORDS = {"passed": (1, 0, 0), "failed": (1, 1, 0)}
if "passed" in said: pass
if state.phase == Phase.CLOSED: pass
'''
    assert list(bare(ast.parse(fine))) == []

"""The scripted agent's review: a failing test command turned into a must-fix finding (where it
failed and why), and the reviewer's report from what its test commands did."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import NotRequired, TypedDict

import yaml

from handoff.peer.scripted_brief import Brief, Script, listed
from handoff.protocol.reports import QUESTIONED
from handoff.verdicts import Verdict

LOCATION = (re.compile(r'File "([^"]+)", line (\d+)'), re.compile(r"^([^\s:]+\.\w+):(\d+):", re.M))


class Failure(TypedDict):
    """A must-fix finding of the agent's review report (handoff.protocol.reports)."""

    file: str
    line: int
    reason: str
    criterion: NotRequired[str]


def failing_location(output: str, worktree: Path) -> tuple[str, int]:
    """The last file:line in the output that lies inside the worktree (where the failure is)."""
    matches = sorted((m for pattern in LOCATION for m in pattern.finditer(output)),
                     key=lambda m: m.start())
    best: tuple[str, int] = ("", 0)
    for match in matches:
        path = Path(match.group(1))
        full = path if path.is_absolute() else worktree / path
        try:
            relative = full.resolve().relative_to(worktree.resolve())
        except ValueError:
            continue
        if full.is_file():
            best = (str(relative), int(match.group(2)))
    return best


def first_failure(output: str) -> str:
    """The block of output about the first failing test (all of it when none is named)."""
    lines = output.splitlines()
    marks = [i for i, ln in enumerate(lines) if ln.startswith(("FAIL:", "ERROR:", "FAILED ", "_"))]
    marks = [i for i in marks if not lines[i].startswith("_") or "test" in lines[i]]
    if not marks:
        return output
    end = marks[1] if len(marks) > 1 else len(lines)
    return "\n".join(lines[marks[0]:end])


def failure_reason(argv: list[str], block: str) -> str:
    lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
    named = [ln for ln in lines if ln.startswith(("FAIL:", "ERROR:", "FAILED "))]
    header = re.match(r"^_{3,}\s*(\S.*?)\s*_{3,}$", lines[0]) if lines else None
    if header:  # pytest names the test in the block's own header line
        named.insert(0, f"FAILED {header.group(1)}")
    errors = [ln for ln in lines if re.match(r"^(E\s+)?\w*(Error|Exception)\b", ln)]
    detail = "; ".join(x for x in (named[:1] + errors[:1]) if x) or (lines[-1] if lines else "")
    return f"`{' '.join(argv)}` fails: {detail}"


def failure(argv: list[str], output: str, worktree: Path) -> Failure:
    """A failing test command as a must-fix: where it failed, and why."""
    block = first_failure(output)
    file, line = failing_location(block, worktree)
    return {"file": file or argv[-1], "line": line, "reason": failure_reason(argv, block)}


def _key(file: str, reason: str) -> str:
    return f"{file}::{' '.join(reason.lower().split())}"


def review_report(brief: Brief, behaviour: Script, failures: list[Failure],
                  ran: list[str]) -> str:
    """A reviewer's report from what its test commands did (failures: must-fix findings):
    each earlier finding of the ledger answered (not-fixed when the same failure is still
    there), each weakened test answered, and a later round's new failure raised for the
    plan's own criterion AC0 (its tests pass). The script adds its own findings and answers."""
    commit, earlier = brief.commit, brief.earlier
    still = {_key(str(e["file"]), str(e["reason"])): str(e["id"]) for e in earlier}
    answers: dict[str, str] = {}
    fresh: list[Failure] = []
    for found in failures:
        ident = still.get(_key(found["file"], found["reason"]))
        if ident is not None:
            answers[ident] = "not-fixed"
        else:
            fresh.append({**found, "criterion": "AC0"} if earlier else found)
    said_ledger = _answers(behaviour, "ledger")
    ledger = [{"id": str(e["id"]), "status": str(said_ledger.get(
        e["id"], answers.get(str(e["id"]), "fixed"))),
        "evidence": f"ran {'; '.join(ran) or 'no test command'} at {commit[:10]}"}
        for e in earlier]
    questioned = {asked.key: [{"id": ident, "answer": str(
        _answers(behaviour, asked.key).get(ident, "justified")),
        "reason": "the scripted reviewer takes the plan's word for it"}
        for ident in brief.asked.get(asked.key, ())] for asked in QUESTIONED}
    must = [*fresh, *listed(behaviour.get("must_fix"))]
    blocking = must or any(a["status"] != "fixed" for a in ledger) or \
        any(w["answer"] != "justified" for items in questioned.values() for w in items)
    verdict = (Verdict.FAIL if blocking else Verdict.PASS).value
    front: dict[str, object] = {"verdict": verdict, "commit": commit, "must_fix": must,
                                "should_fix": []}
    if ledger:
        front["ledger"] = ledger
    for key, items in questioned.items():
        # ignore_unrequested / ignore_unproven: a reviewer that leaves them unanswered
        if items and not behaviour.get(f"ignore_{key}"):
            front[key] = items
    return ("---\n" + yaml.safe_dump(front, sort_keys=False, width=1000) + "---\n## Summary\n"
            + f"Ran {len(ran)} test command(s) at {commit[:10]}: {verdict}.\n"
            + "\n## Tests run\n" + ("; ".join(ran) or "none") + "\n")


def _answers(behaviour: Script, key: str) -> Mapping[object, object]:
    """The script's own answers under key (ledger: {F1: not-fixed}, weakened: {W1: …})."""
    said = behaviour.get(key)
    return said if isinstance(said, dict) else {}

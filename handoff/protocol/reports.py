"""Reports peers hand back: parsed and checked for shape (the orchestrator checks the claims).

Implementer and tester: `status: done|blocked|partial`, `commit`, sections Changes /
Verification / Deviations / Open questions. Reviewer: `verdict: pass|fail`, `commit` (the one
reviewed), `must_fix` / `should_fix` lists of {file, line, reason, criterion}; from the second
review on `ledger` (each earlier must-fix answered {id, status: fixed|not-fixed, evidence})
and `weakened` (each weakened test answered {id, answer: justified|unjustified, reason}). A
fail needs something that must be fixed, a pass has nothing of it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from handoff.protocol.frontmatter import FrontmatterError, join, split
from handoff.role import Kind
from handoff.verdicts import STATUSES, VERDICTS, Status, Verdict

IMPL_SECTIONS = ("Changes", "Verification", "Deviations", "Open questions")
#: a ledger answer: the earlier must-fix is fixed at this commit, or it is not
FIXED, NOT_FIXED = "fixed", "not-fixed"
#: an answer about a weakened test: the change meant it (the plan says so), or it did not
JUSTIFIED, UNJUSTIFIED = "justified", "unjustified"
SHA = re.compile(r"[0-9a-f]{7,40}")
LEDGER_ID = re.compile(r"F[1-9][0-9]{0,3}")


@dataclass(frozen=True)
class Questioned:
    """A list every reviewer answers item by item, `justified` or `unjustified`: its brief
    lists the items under key with their ids, and its report answers them under the same key
    ({id, answer, reason}). A pass cannot carry an unjustified one."""

    key: str
    #: its ids: the prefix and a number (W1, U2, P3)
    prefix: str
    #: one of its items, as a person calls it
    noun: str
    #: the report template's example reason
    example: str

    def id_matches(self, ident: str) -> bool:
        return re.fullmatch(rf"{self.prefix}[1-9][0-9]{{0,3}}", ident) is not None


#: the tests the change weakened (handoff.loop.weakened)
WEAKENED = Questioned("weakened", "W", "weakened test", "why the change meant it")
#: a fix round's changes no finding asked for (handoff.loop.unrequested)
UNREQUESTED = Questioned("unrequested", "U", "unrequested change",
                         "the finding or plan step that needed it")
#: the new tests that pass at the base too (handoff.loop.proof)
UNPROVEN = Questioned("unproven", "P", "unproven test",
                      "what it guards that the change needed, though it passes without it")
QUESTIONED = (WEAKENED, UNREQUESTED, UNPROVEN)


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    reason: str
    #: the plan's acceptance criterion (AC1, …) a later round's new must-fix is about
    criterion: str = ""

    def key(self) -> str:
        """What makes two findings 'the same' across rounds: the line may move, the rest not."""
        return f"{self.file}::{' '.join(self.reason.lower().split())}"

    def render(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Answer:
    """A reviewer's answer to an earlier must-fix of the ledger."""

    id: str
    status: str  # FIXED or NOT_FIXED
    evidence: str


@dataclass(frozen=True)
class Justified:
    """A reviewer's answer about one test the change weakened."""

    id: str
    answer: str  # JUSTIFIED or UNJUSTIFIED
    reason: str


@dataclass(frozen=True)
class Report:
    role: str
    commit: str
    status: str = ""
    verdict: str = ""
    must_fix: tuple[Finding, ...] = ()
    should_fix: tuple[Finding, ...] = ()
    ledger: tuple[Answer, ...] = ()
    #: the answers to each QUESTIONED list, by its key
    answers: Mapping[str, tuple[Justified, ...]] = field(default_factory=dict)
    sections: dict[str, str] = field(default_factory=dict)
    body: str = ""
    #: a planner's: the plan it drafted, as a plan file holds it (`drafted_plan`)
    plan: str = ""

    def not_fixed(self) -> list[Answer]:
        return [a for a in self.ledger if a.status == NOT_FIXED]

    def answered(self, asked: Questioned) -> tuple[Justified, ...]:
        return tuple(self.answers.get(asked.key, ()))

    @property
    def weakened(self) -> tuple[Justified, ...]:
        return self.answered(WEAKENED)

    @property
    def unrequested(self) -> tuple[Justified, ...]:
        return self.answered(UNREQUESTED)

    @property
    def unproven(self) -> tuple[Justified, ...]:
        return self.answered(UNPROVEN)

    def unjustified(self) -> list[Justified]:
        return [a for asked in QUESTIONED for a in self.answered(asked)
                if a.answer == UNJUSTIFIED]


def sections_of(body: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        heading = re.match(r"^#{1,3}\s+(.+?)\s*#*\s*$", line)
        if heading:
            current = found.setdefault(heading.group(1).strip().lower(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def _findings(data: Mapping[str, object], key: str, problems: list[str]) -> tuple[Finding, ...]:
    raw = data.get(key, [])
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        problems.append(f"'{key}' must be a list of {{file, line, reason}} items")
        return ()
    out = []
    for i, item in enumerate(raw):
        where = f"{key}[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where} must be a mapping with file, line and reason")
            continue
        file, line, reason = item.get("file"), item.get("line"), item.get("reason")
        if not isinstance(file, str) or not file.strip():
            problems.append(f"{where}.file must name a file")
        if not isinstance(line, int) or isinstance(line, bool) or line < 0:
            problems.append(f"{where}.line must be a line number (0 when no line applies)")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}.reason must say what is wrong")
        criterion = item.get("criterion") or ""
        if not isinstance(criterion, str):
            problems.append(f"{where}.criterion must name a criterion of the plan, e.g. AC2")
            criterion = ""
        if isinstance(file, str) and isinstance(line, int) and isinstance(reason, str):
            out.append(Finding(file.strip(), line, reason.strip(), criterion.strip()))
    return tuple(out)


def _answers(data: Mapping[str, object], problems: list[str]) -> tuple[Answer, ...]:
    """ledger: [{id: F1, status: fixed|not-fixed, evidence: "..."}]"""
    out = []
    for i, item in enumerate(_items(data, "ledger", "{id, status, evidence}", problems)):
        where = f"ledger[{i}]"
        ident, status, evidence = item.get("id"), item.get("status"), item.get("evidence")
        status = "-".join(str(status).lower().replace("_", " ").split()) if status else status
        if not isinstance(ident, str) or not LEDGER_ID.fullmatch(ident.strip()):
            problems.append(f"{where}.id must be an earlier finding's id from your brief, e.g. F1")
        elif status not in (FIXED, NOT_FIXED):
            problems.append(f"{where} ({ident}): status must be {FIXED} or {NOT_FIXED}, not "
                            f"{item.get('status')!r:.40}")
        elif not isinstance(evidence, str) or not evidence.strip():
            problems.append(f"{where} ({ident}): evidence must say how you know: a test name, "
                            "a file:line")
        else:
            out.append(Answer(ident.strip(), str(status), evidence.strip()))
    return tuple(out)


def _justified(data: Mapping[str, object], problems: list[str],
               asked: Questioned) -> tuple[Justified, ...]:
    """weakened: [{id: W1, answer: justified|unjustified, reason: "..."}]; the same shape
    under each key of QUESTIONED, with its own ids"""
    key = asked.key
    out = []
    for i, item in enumerate(_items(data, key, "{id, answer, reason}", problems)):
        where = f"{key}[{i}]"
        ident, answer, reason = item.get("id"), item.get("answer"), item.get("reason")
        if not isinstance(ident, str) or not asked.id_matches(ident.strip()):
            article = "an" if asked.noun[0] in "aeiou" else "a"
            problems.append(f"{where}.id must be {article} {asked.noun}'s id from your brief, "
                            f"e.g. {asked.prefix}1")
        elif answer not in (JUSTIFIED, UNJUSTIFIED):
            problems.append(f"{where} ({ident}): answer must be {JUSTIFIED} or {UNJUSTIFIED}, "
                            f"not {answer!r:.40}")
        elif not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where} ({ident}): reason must say why (the plan's words, or "
                            "what the test guarded)")
        else:
            out.append(Justified(ident.strip(), str(answer), reason.strip()))
    return tuple(out)


def _items(data: Mapping[str, object], key: str, shape: str,
           problems: list[str]) -> list[Mapping[str, object]]:
    raw = data.get(key) or []
    if not isinstance(raw, list):
        problems.append(f"'{key}' must be a list of {shape} items")
        return []
    bad = [i for i, item in enumerate(raw) if not isinstance(item, dict)]
    problems.extend(f"{key}[{i}] must be a mapping {shape}" for i in bad)
    return [item for item in raw if isinstance(item, dict)]


def parse(text: str, kind: str, expect: Mapping[str, object] | None = None,
          role: str = "") -> tuple[Report | None, list[str]]:
    """Parse a report of a role of this kind (a role's name that is a kind: today's callers).
    Returns (report, []) or (None, every problem found)."""
    role = role or kind
    problems: list[str] = []
    try:
        data, body = split(text)
    except FrontmatterError as exc:
        return None, [str(exc)]
    for key, value in (expect or {}).items():
        if key in data and str(data[key]) != str(value):
            problems.append(f"'{key}' is {data[key]!r} but this report is for {key} {value!r}")
    commit = _commit(data, text, problems)
    if kind == Kind.PLANNER:
        report = _planner(data, body, role, commit, problems)
    elif kind in (Kind.IMPLEMENTER, Kind.TESTER):
        report = _worker(data, body, role, commit, problems)
    else:
        report = _reviewer(data, body, role, commit, problems)
    return (None, problems) if problems else (report, [])


def _commit(data: Mapping[str, object], text: str, problems: list[str]) -> str:
    commit = data.get("commit")
    if isinstance(commit, int) and not isinstance(commit, bool):
        # an unquoted all-digit sha reads as a YAML number (even octal): take the raw text
        raw = re.search(r"^commit:\s*([0-9a-fA-F]{7,40})\s*(#.*)?$", text, re.M)
        commit = raw.group(1) if raw else str(commit)
    if not isinstance(commit, str) or not SHA.fullmatch(commit.strip().lower()):
        problems.append("'commit' must be a commit hash (7–40 hex digits), e.g. from "
                        "'git rev-parse HEAD'")
        return ""
    return commit.strip().lower()


def _planner(data: Mapping[str, object], body: str, role: str, commit: str,
             problems: list[str]) -> Report:
    status = data.get("status")
    if status not in (Status.DONE, Status.BLOCKED):
        problems.append(f"'status' must be done (the plan is drafted) or blocked (a "
                        f"question first), not {status!r}")
    sections = sections_of(body)
    if status == Status.BLOCKED and not sections.get("open questions"):
        problems.append("a blocked report must ask its question under '## Open questions'")
    if status == Status.DONE and "grounding" not in sections:
        problems.append("missing section '## Grounding': the files you read and the tests "
                        "you found, each a list item naming its path")
    return Report(role=role, commit=commit, status=str(status), sections=sections,
                  body=body, plan=drafted_plan(data, body))


def _worker(data: Mapping[str, object], body: str, role: str, commit: str,
            problems: list[str]) -> Report:
    """An implementer's or a tester's report."""
    status = data.get("status")
    if status not in STATUSES:
        problems.append(f"'status' must be one of {', '.join(STATUSES)}, not {status!r}")
    sections = sections_of(body)
    missing = [s for s in IMPL_SECTIONS if s.lower() not in sections]
    if missing:
        problems.append("missing section(s): " + ", ".join(f"'## {s}'" for s in missing))
    if status == Status.BLOCKED and not sections.get("open questions"):
        problems.append("a blocked report must ask its question under '## Open questions'")
    return Report(role=role, commit=commit, status=str(status), sections=sections, body=body)


def _reviewer(data: Mapping[str, object], body: str, role: str, commit: str,
              problems: list[str]) -> Report:
    verdict = data.get("verdict")
    if verdict not in VERDICTS:
        problems.append(f"'verdict' must be pass or fail, not {verdict!r}")
    must = _findings(data, "must_fix", problems)
    should = _findings(data, "should_fix", problems)
    report = Report(role=role, commit=commit, verdict=str(verdict), must_fix=must,
                    should_fix=should, ledger=_answers(data, problems),
                    answers={asked.key: _justified(data, problems, asked)
                             for asked in QUESTIONED},
                    sections=sections_of(body), body=body)
    blocking = must or report.not_fixed() or report.unjustified()
    if verdict == Verdict.FAIL and not blocking and "must_fix" not in " ".join(problems):
        problems.append("verdict 'fail' needs at least one must_fix finding (or an earlier "
                        "one answered not-fixed)")
    if verdict == Verdict.PASS and blocking:
        problems.append("verdict 'pass' cannot have must_fix findings, earlier findings "
                        "answered not-fixed, or weakened tests, unrequested changes or "
                        "unproven tests answered unjustified: make it 'fail' or move them to "
                        "should_fix")
    return report


#: what a planner's report frontmatter carries of the plan (handoff.protocol.plan's keys)
PLAN_KEYS = ("test", "review", "may_change", "after", "prove")


def drafted_plan(data: Mapping[str, object], body: str) -> str:
    """The plan a planner's report drafts: its plan keys as the plan's frontmatter, its body
    as the plan's."""
    keys = {key: data[key] for key in PLAN_KEYS if key in data}
    return (join(dict(keys), body.lstrip("\n")) if keys else body.lstrip("\n"))


def verdict_of(text: str) -> str:
    """A reviewer's report's verdict as its frontmatter says it ('' when it says none)."""
    try:
        data, _ = split(text)
    except FrontmatterError:
        return ""
    verdict = data.get("verdict")
    return verdict if isinstance(verdict, str) else ""


def template(kind: str, commit: str = "<commit sha>", earlier: tuple[str, ...] = (),
             asked: Mapping[str, Sequence[str]] | None = None) -> str:
    """The report skeleton shown in every brief; a later review's carries a line for each
    earlier finding (earlier: their ids), and a reviewer's for each item it must answer
    (asked: the ids under each key of QUESTIONED)."""
    if kind == Kind.PLANNER:
        return (
            f"---\nstatus: done            # done | blocked (a question for a person first)\n"
            f"commit: '{commit}'\ntest: python -m pytest -q tests/test_the_module.py   # the "
            "exact verification command\nmay_change: []          # control files the ticket "
            "may change (CLAUDE.md, CI files), if any\n---\n# The ticket's title\n\nWhat the "
            "implementer must do, step by step, naming the files.\n\n## Acceptance criteria\n"
            "- a criterion a reviewer can check\n\n## Grounding\n- `path/to/file.py`: what "
            "you read there\n- `tests/test_file.py`: the tests that cover it\n\n"
            "## Open questions\nQuestions for a person, or 'None'.\n"
        )
    if kind in (Kind.IMPLEMENTER, Kind.TESTER):
        return (
            f"---\nstatus: done            # done | blocked | partial\ncommit: '{commit}'\n---\n"
            "## Changes\nWhat you changed and why.\n\n## Verification\n"
            "Commands you ran and their results.\n\n## Deviations\nWhere you left the plan, "
            "or 'None'.\n\n## Open questions\nQuestions for a person, or 'None'.\n"
        )
    ledger = "".join(f"  - {{id: {ident}, status: fixed, evidence: \"the test or file:line "
                     "that shows it\"}\n" for ident in earlier)
    answers = "".join(
        f"{q.key + ':':<24}# every {q.noun}: justified | unjustified\n"
        + "".join(f"  - {{id: {ident}, answer: justified, reason: \"{q.example}\"}}\n"
                  for ident in (asked or {})[q.key])
        for q in QUESTIONED if (asked or {}).get(q.key))
    scope = ("    criterion: AC1       # a later round: only for a line the fix rounds changed, "
             "or a criterion still unmet\n") if earlier else ""
    return (
        f"---\nverdict: fail           # pass | fail\ncommit: '{commit}'\nmust_fix:\n"
        "  - file: path/to/file.py\n    line: 42\n    reason: what is wrong and why it "
        f"matters\n{scope}should_fix: []\n"
        + (f"ledger:                 # every earlier must-fix: fixed | not-fixed\n{ledger}"
           if earlier else "")
        + answers
        + "---\n## Tests run\nEach test command you ran, and what it said (e.g. `pytest -q`: "
        "42 passed).\n\n## Summary\nWhat you checked and what you found.\n"
    )

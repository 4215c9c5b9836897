"""Reports peers hand back: parsed and checked for shape (the orchestrator checks the claims).

Implementer: `status: done|blocked|partial`, `commit`, sections Changes / Verification /
Deviations / Open questions. Reviewer: `verdict: pass|fail`, `commit` (the one reviewed),
`must_fix` / `should_fix` lists of {file, line, reason}; fail needs a must-fix, pass has none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from handoff.protocol.frontmatter import FrontmatterError, split

IMPL_SECTIONS = ("Changes", "Verification", "Deviations", "Open questions")
STATUSES = ("done", "blocked", "partial")
VERDICTS = ("pass", "fail")
SHA = re.compile(r"[0-9a-f]{7,40}")


@dataclass(frozen=True)
class Finding:
    file: str
    line: int
    reason: str

    def key(self) -> str:
        """What makes two findings 'the same' across rounds: the line may move, the rest not."""
        return f"{self.file}::{' '.join(self.reason.lower().split())}"

    def render(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass(frozen=True)
class Report:
    role: str
    commit: str
    status: str = ""
    verdict: str = ""
    must_fix: tuple[Finding, ...] = ()
    should_fix: tuple[Finding, ...] = ()
    sections: dict[str, str] = field(default_factory=dict)
    body: str = ""


def _sections(body: str) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in body.splitlines():
        heading = re.match(r"^#{1,3}\s+(.+?)\s*#*\s*$", line)
        if heading:
            current = found.setdefault(heading.group(1).strip().lower(), [])
        elif current is not None:
            current.append(line)
    return {k: "\n".join(v).strip() for k, v in found.items()}


def _findings(data: dict[str, Any], key: str, problems: list[str]) -> tuple[Finding, ...]:
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
        if isinstance(file, str) and isinstance(line, int) and isinstance(reason, str):
            out.append(Finding(file.strip(), line, reason.strip()))
    return tuple(out)


def parse(text: str, role: str, expect: dict[str, Any] | None = None) -> tuple[Report | None, list[str]]:
    """Parse a report for role. Returns (report, []) or (None, every problem found)."""
    problems: list[str] = []
    try:
        data, body = split(text)
    except FrontmatterError as exc:
        return None, [str(exc)]
    for key, value in (expect or {}).items():
        if key in data and str(data[key]) != str(value):
            problems.append(f"'{key}' is {data[key]!r} but this report is for {key} {value!r}")
    commit = data.get("commit")
    if isinstance(commit, int) and not isinstance(commit, bool):
        # an unquoted all-digit sha reads as a YAML number (even octal): take the raw text
        raw = re.search(r"^commit:\s*([0-9a-fA-F]{7,40})\s*(#.*)?$", text, re.M)
        commit = raw.group(1) if raw else str(commit)
    if not isinstance(commit, str) or not SHA.fullmatch(commit.strip().lower()):
        problems.append("'commit' must be a commit hash (7–40 hex digits), e.g. from "
                        "'git rev-parse HEAD'")
        commit = ""
    commit = commit.strip().lower()
    if role == "implementer":
        status = data.get("status")
        if status not in STATUSES:
            problems.append(f"'status' must be one of {', '.join(STATUSES)}, not {status!r}")
        sections = _sections(body)
        missing = [s for s in IMPL_SECTIONS if s.lower() not in sections]
        if missing:
            problems.append("missing section(s): " + ", ".join(f"'## {s}'" for s in missing))
        if status == "blocked" and not sections.get("open questions"):
            problems.append("a blocked report must ask its question under '## Open questions'")
        report = Report(role=role, commit=commit, status=str(status), sections=sections, body=body)
    else:
        verdict = data.get("verdict")
        if verdict not in VERDICTS:
            problems.append(f"'verdict' must be pass or fail, not {verdict!r}")
        must = _findings(data, "must_fix", problems)
        should = _findings(data, "should_fix", problems)
        if verdict == "fail" and not must and "must_fix" not in " ".join(problems):
            problems.append("verdict 'fail' needs at least one must_fix finding")
        if verdict == "pass" and must:
            problems.append("verdict 'pass' cannot have must_fix findings: make it 'fail' "
                            "or move them to should_fix")
        report = Report(role=role, commit=commit, verdict=str(verdict), must_fix=must,
                        should_fix=should, sections=_sections(body), body=body)
    return (None, problems) if problems else (report, [])


def template(role: str, commit: str = "<commit sha>") -> str:
    """The report skeleton shown in every brief."""
    if role == "implementer":
        return (
            f"---\nstatus: done            # done | blocked | partial\ncommit: '{commit}'\n---\n"
            "## Changes\nWhat you changed and why.\n\n## Verification\n"
            "Commands you ran and their results.\n\n## Deviations\nWhere you left the plan, "
            "or 'None'.\n\n## Open questions\nQuestions for a person, or 'None'.\n"
        )
    return (
        f"---\nverdict: fail           # pass | fail\ncommit: '{commit}'\nmust_fix:\n"
        "  - file: path/to/file.py\n    line: 42\n    reason: what is wrong and why it "
        "matters\nshould_fix: []\n---\n## Summary\nWhat you checked and what you found.\n"
    )

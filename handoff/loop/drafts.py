"""A planner's drafted plan checked before a person sees it: it parses as a plan, names a
verification command that exists (or the repository's `test:` stands in for it), and every
file it says it read or names in its commands is in the base commit. What is wrong goes back
to the planner, each problem on its own line, as any report's problems do.

The checks read git's tree of the base, never the planner's checkout (a peer may change
that), and run nothing the plan names.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence

from handoff.errors import UsageError
from handoff.protocol import plan as plan_mod
from handoff.protocol.reports import Report

#: a grounding list item's path: backticked, else the item's first word (before a colon)
GROUNDED = re.compile(r"^\s*[-*+]\s+(?:`([^`]+)`|([^\s:`]+))")
#: a fenced block (a `handoff-script`, an example): not a list of what was read
FENCED = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
#: what a command's argument that names a file of the repository looks like
SOURCE = re.compile(r"\.(py|js|ts|tsx|jsx|rb|go|rs|java|kt|c|h|cc|cpp|sh|toml|ini|cfg|json)$")


def problems(report: Report, paths: frozenset[str], default_test: Sequence[str] | None,
             path_env: str | None = None) -> list[str]:
    """What keeps the planner's report from being a plan a person may approve ([] if none).
    paths: the base commit's files and folders; default_test: the repository's `test:`."""
    found = plan_problems(report.plan, paths, default_test, path_env)
    named = grounding(report.sections.get("grounding", ""))
    if not named:
        found.append("'## Grounding' names no file: list each file you read and each test "
                     "file you found, one list item each, its path first (`src/x.py`: why)")
    return found + unknown_paths(named, paths)


def plan_problems(text: str, paths: frozenset[str], default_test: Sequence[str] | None,
                  path_env: str | None = None) -> list[str]:
    """What keeps text from being a plan its gate can run: it parses, names a verification
    command (or the repository has one), and each command's program and files exist."""
    try:
        plan = plan_mod.parse(text, "the drafted plan")
    except UsageError as exc:
        return [exc.message + (f" ({exc.hint})" if exc.hint else "")]
    found: list[str] = []
    if plan.test is None and not default_test:
        found.append("the plan names no verification command: put the exact command that "
                     "runs the relevant tests in `test:` (this repository sets no default)")
    for key, command in (("test", plan.test),
                         *((f"review[{i}]", c) for i, c in enumerate(plan.review))):
        if command:
            found += _command(key, command, paths, path_env)
    return found


def grounding(section: str) -> list[str]:
    """The paths a `## Grounding` section lists, one a list item (fenced blocks aside)."""
    listed = FENCED.sub("", section)
    return [path for path in (_grounded(line) for line in listed.splitlines()) if path]


def unknown_paths(named: Sequence[str], paths: frozenset[str]) -> list[str]:
    return [f"'## Grounding' names {path}, which is not in the base commit: name only files "
            "you read there (paths from the repository's top)"
            for path in named if _clean(path) not in paths]


def _command(key: str, command: Sequence[str], paths: frozenset[str],
             path_env: str | None) -> list[str]:
    """A command's program exists (on PATH, or in the repository), and each argument that
    names a file of the repository names one the base has."""
    found = []
    program = command[0]
    if "/" in program:
        there = os.path.exists(program) if os.path.isabs(program) else _clean(program) in paths
        if not there:
            found.append(f"{key}: {program} does not exist in the base commit")
    elif shutil.which(program, path=path_env) is None:
        found.append(f"{key}: there is no program {program!r} on this machine's PATH: name "
                     "a command the gate can run (e.g. python -m pytest)")
    for argument in command[1:]:
        path = argument.split("::", 1)[0]
        if path.startswith("-") or "=" in path or not ("/" in path or SOURCE.search(path)):
            continue
        if not os.path.isabs(path) and _clean(path) not in paths:
            found.append(f"{key}: {argument} is not in the base commit: name a test file or "
                         "folder that exists (paths from the repository's top)")
    return found


def _grounded(line: str) -> str:
    match = GROUNDED.match(line)
    if match is None:
        return ""
    return (match.group(1) or match.group(2) or "").strip()


def _clean(path: str) -> str:
    """A path as git's tree names it: no leading ./, no trailing /."""
    path = path.strip()
    while path.startswith("./"):
        path = path[2:]
    return path.rstrip("/")

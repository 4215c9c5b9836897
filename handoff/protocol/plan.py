"""The approved plan: what to do, how to verify it, and (for the scripted agent) how to act.

A plan is Markdown, optionally with YAML frontmatter:

    ---
    test: python -m pytest -q          # the verification command (gate + implementer)
    review:                            # the reviewer's test commands (default: [test])
      - python -m pytest -q
    may_change: [CLAUDE.md]            # control files this ticket may change (protected.py)
    ticket: PROJ-12                    # its ticket's id, for `handoff start --plans`
    after: [PROJ-11]                   # tickets it builds on: it waits until they pass
    prove: mutants                     # also run the new tests against small mutations of
                                       # the changed lines (handoff.loop.mutants)
    ---

A `## Acceptance criteria` section's list items are the plan's criteria, AC1, AC2, … in
order: a tester writes tests for them, and a later review may raise a new must-fix outside
the lines the fix rounds changed only for one of them still unmet.

Fenced blocks tagged `handoff-script` carry machine-readable per-round actions that the
built-in scripted agent performs; real CLIs read them as plain text.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass, field

import yaml

from handoff.errors import UsageError
from handoff.inputs import PLAN_LIMIT
from handoff.protocol.frontmatter import FrontmatterError, load_yaml, split

SCRIPT_BLOCK = re.compile(r"^```handoff-script[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
CRITERIA_HEADING = re.compile(r"^#{2,3}\s+acceptance criteria\s*#*\s*$", re.I)
LIST_ITEM = re.compile(r"^(?:[-*+]|\d+[.)])\s+(.*)$")
Argv = tuple[str, ...]


@dataclass(frozen=True)
class Plan:
    text: str
    test: Argv | None = None
    review: tuple[Argv, ...] = ()
    scripts: dict[int, dict[str, object]] = field(default_factory=dict)
    #: control files (handoff.protocol.protected) the approved plan lets the ticket change
    may_change: tuple[str, ...] = ()
    #: the acceptance criteria, in order: AC1 is criteria[0]
    criteria: tuple[str, ...] = ()
    #: the ticket id the plan names for itself ('' when it names none)
    ticket: str = ""
    #: the tickets it builds on (handoff.loop.after)
    after: tuple[str, ...] = ()
    #: what the gate proves beyond the new tests at the base: PROVE_MUTANTS
    prove: tuple[str, ...] = ()

    def criterion(self, ident: str) -> str | None:
        """The text of criterion AC<n> (as a reviewer names it, any case), None if none. AC0
        is every plan's own: its test commands pass (when it names any)."""
        match = re.fullmatch(r"\s*ac\s*(\d+)\s*", ident, re.I)
        n = int(match.group(1)) if match else -1
        if n == 0:
            return self.tests_pass()
        return self.criteria[n - 1] if 0 < n <= len(self.criteria) else None

    def tests_pass(self) -> str | None:
        commands = [" ".join(c) for c in (*((self.test,) if self.test else ()), *self.review)]
        return f"the plan's test commands pass: {'; '.join(dict.fromkeys(commands))}" \
            if commands else None

    def listed_criteria(self) -> list[str]:
        own = self.tests_pass()
        return ([f"AC0: {own}"] if own else []) + [
            f"AC{i}: {text}" for i, text in enumerate(self.criteria, start=1)]

    @property
    def review_commands(self) -> tuple[Argv, ...]:
        if self.review:
            return self.review
        return (self.test,) if self.test else ()


def command_line(source: str, key: str, value: object) -> Argv:
    """A command as a plan or a configuration file gives it: a command line (split as a shell
    would, without running one) or a list of arguments; never empty."""
    if isinstance(value, str):
        try:
            parts = shlex.split(value)
        except ValueError as exc:
            raise UsageError(f"{source}: '{key}' is not a valid command line: {exc}") from None
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = list(value)
    else:
        raise UsageError(f"{source}: '{key}' must be a command line or a list of arguments")
    if not parts:
        raise UsageError(f"{source}: '{key}' is empty")
    return tuple(parts)


@functools.lru_cache(maxsize=8)
def parse(text: str, source: str = "plan") -> Plan:
    """Parse a plan; a plan without frontmatter is plain prose with no verification command.

    The same text gives the same Plan, kept: a ticket's loop asks for its plan about 20 times
    (each brief, gate and judgement), and parsing its YAML was 7 ms each, 170 ms of a scripted
    ticket (bench floor). A Plan is frozen; no caller changes its scripts."""
    if len(text.encode("utf-8", "replace")) > PLAN_LIMIT:  # it is pasted into every brief
        raise UsageError(f"{source} is larger than {PLAN_LIMIT // 1024} KiB",
                         "shorten the plan: it goes into every brief")
    data: dict[str, object] = {}
    body = text
    if text.lstrip("\ufeff").startswith("---"):
        try:
            data, body = split(text)
        except FrontmatterError as exc:
            raise UsageError(f"{source}: {exc}") from None
    if not body.strip(" \t\r\n\ufeff"):  # a run would brief its peers with nothing to do
        raise UsageError(f"{source} is empty: it says nothing the ticket must do",
                         "write what the ticket must achieve (and, under '## Acceptance "
                         "criteria', how a reviewer tells it did) below the frontmatter")
    unknown = set(data) - {"test", "review", "may_change", "ticket", "after", "prove"}
    if unknown:
        raise UsageError(f"{source}: unknown frontmatter key(s) {sorted(unknown)}",
                         "a plan's frontmatter knows 'test', 'review', 'may_change', "
                         "'ticket', 'after' and 'prove'")
    ticket = data.get("ticket", "")
    if isinstance(ticket, int) and not isinstance(ticket, bool):
        ticket = str(ticket)  # ticket: 123 reads as a number
    if not isinstance(ticket, str):
        raise UsageError(f"{source}: 'ticket' must be a ticket id, e.g. ticket: PROJ-12")
    may_change = data.get("may_change", [])
    if isinstance(may_change, str):
        may_change = [may_change]
    if not isinstance(may_change, list) or not all(isinstance(v, str) and v.strip()
                                                   for v in may_change):
        raise UsageError(f"{source}: 'may_change' must be a list of paths or patterns",
                         "e.g. may_change: [CLAUDE.md, .github/workflows/]")
    test = command_line(source, "test", data["test"]) if "test" in data else None
    review_raw = data.get("review", [])
    if not isinstance(review_raw, list):
        review_raw = [review_raw]
    review = tuple(command_line(source, f"review[{i}]", v) for i, v in enumerate(review_raw))
    return Plan(text=text, test=test, review=review, scripts=_scripts(text, source),
                may_change=tuple(may_change), criteria=criteria(text), ticket=ticket.strip(),
                after=_after(data, source), prove=_prove(data, source))


#: `prove: mutants`: the new tests also run against mutations of the changed lines
PROVE_MUTANTS = "mutants"


def _after(data: dict[str, object], source: str) -> tuple[str, ...]:
    after = data.get("after", [])
    if isinstance(after, (str, int)) and not isinstance(after, bool):
        after = [after]
    if not isinstance(after, list) or not all(
            isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip()
            for v in after):
        raise UsageError(f"{source}: 'after' must be a list of ticket ids",
                         "e.g. after: [PROJ-11]")
    return tuple(dict.fromkeys(str(v).strip() for v in after))


def _prove(data: dict[str, object], source: str) -> tuple[str, ...]:
    prove = data.get("prove", [])
    listed = [prove] if isinstance(prove, str) else prove
    if not isinstance(listed, list) or any(v != PROVE_MUTANTS for v in listed):
        raise UsageError(f"{source}: 'prove' knows only {PROVE_MUTANTS!r}, not {prove!r:.60}",
                         "e.g. prove: mutants (the new tests also run against small "
                         "mutations of the changed lines)")
    return tuple(dict.fromkeys(str(v) for v in listed))


def criteria(text: str) -> tuple[str, ...]:
    """The list items under the first `## Acceptance criteria` heading (a `handoff-script`
    block's lines aside), each one line however it wrapped."""
    found: list[str] = []
    inside = False
    for line in SCRIPT_BLOCK.sub("", text).splitlines():
        if CRITERIA_HEADING.match(line.strip()):
            inside = True
            continue
        if not inside:
            continue
        if line.startswith("#"):
            break  # the next section
        item = LIST_ITEM.match(line)
        if item and not line[:1].isspace():
            found.append(item.group(1).strip())
        elif found and line.strip():  # a wrapped item, or a nested point of it
            found[-1] += " " + line.strip().lstrip("-*+ ")
    return tuple(" ".join(c.split()) for c in found if c.strip())


def _scripts(text: str, source: str) -> dict[int, dict[str, object]]:
    scripts: dict[int, dict[str, object]] = {}
    for match in SCRIPT_BLOCK.finditer(text):
        try:
            block = load_yaml(match.group(1))
        except yaml.YAMLError as exc:
            raise UsageError(f"{source}: a handoff-script block is not valid YAML: {exc}") from None
        if not isinstance(block, dict) or not isinstance(block.get("round"), int):
            raise UsageError(f"{source}: each handoff-script block needs 'round: N'")
        scripts[block["round"]] = block
    return scripts

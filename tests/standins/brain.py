"""The stand-in model's mind: what a coding agent does with a handoff brief, as tool actions.

The stand-in model servers (Anthropic Messages, OpenAI Responses) are stateless: on every
request they hand the brain the turn's prompt (the newest plain user message) and the text of
every tool result since, and render the one next action it returns in their own wire format.
The real CLI then carries the action out with its own tools (read, edit, shell).

The brain acts from the same `handoff-script` blocks of the plan as the built-in scripted
agent, plus a few keys for real CLIs (`cli:` in a round's block):

    cli: {silent: once}     # end the first turn without filing the report (a nudge follows)
    cli: {silent: always}   # never file a report
    cli: {idle: true}       # do nothing at all: end every turn at once

(for the implementer; any other role's go under its own name: `reviewer: {cli: …}`,
`security: {cli: …, must_fix: […]}`; a tester acts from its part as the implementer does from
the block, and a reviewer's report is the scripted agent's, ledger answers and all).

Shell commands end with `; echo handoff-exit=$?` where the brain needs the exit status, so
it can read it from the tool result whatever the CLI's own result format is.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from handoff.loop.drafts import grounding
from handoff.peer.scripted_agent import own_script, planner_drafts, planner_script
from handoff.peer.scripted_brief import Brief, Script, listed
from handoff.peer.scripted_review import Failure, failure, review_report
from handoff.protocol.frontmatter import split
from handoff.protocol.reports import sections_of

BRIEF = re.compile(r"(/\S+/brief-\d+\.md)")
EXIT = re.compile(r"handoff-exit=(\d+)")


@dataclass(frozen=True)
class Read:
    path: str


@dataclass(frozen=True)
class Edit:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Write:
    path: str
    #: computed when the action is sent, so a report names the commit made just before
    content: Callable[[], str]


@dataclass(frozen=True)
class Shell:
    command: str
    cwd: str


@dataclass(frozen=True)
class Say:
    """The turn's final text: the model ends its turn."""

    text: str


Action = Read | Edit | Write | Shell | Say


def next_action(prompt: str, results: Sequence[str]) -> Action:
    """The action after len(results) tool calls of the turn that prompt started."""
    actions = turn(prompt, results)
    return actions[len(results)] if len(results) < len(actions) else Say("Done.")


def turn(prompt: str, results: Sequence[str]) -> list[Action]:
    """Every action of one turn; the same list on every request (results only fill details)."""
    match = BRIEF.search(prompt)
    if match is None:
        return [Say("I have no brief to work on.")]
    brief_path = Path(match.group(1))
    if not brief_path.is_file():
        return [Say(f"The brief {brief_path} does not exist.")]
    fields, _ = split(brief_path.read_text(encoding="utf-8"))
    brief = Brief.read(fields)
    nudged = not prompt.lstrip().startswith("Read and follow")
    if brief.kind == "planner":  # no plan yet: its script is in the ticket's text
        return plan(brief, brief_path, results)
    own = own_script(brief) or {}
    cli = own.get("cli")
    cli = cli if isinstance(cli, dict) else {}
    if cli.get("idle"):
        return [Say("Waiting.")]
    silent = cli.get("silent") == "always" or (cli.get("silent") == "once" and not nudged)
    if brief.kind != "reviewer":
        actions = [] if nudged else [Read(str(brief_path)), *implement(brief, own)]
        report = implementer_report(brief, own)
    else:
        actions = [Read(str(brief_path)), *review(brief)]
        report = reviewer_report(brief, own, results)
    if silent:
        return [*actions, Say("I made the change and stop here.")]
    return [*actions, Write(str(brief.report), report),
            Shell(shlex.join(brief.submit), str(brief.worktree)),
            Say("I filed my report.")]


def plan(brief: Brief, brief_path: Path, results: Sequence[str]) -> list[Action]:
    """A planner's turn: the brief and the ticket read, then each file its drafts say they
    read (a made-up one too: its Read fails), the first draft's test command run in the
    checkout; then its drafts written and filed in order
    until `handoff submit` accepts one (each submit's result says)."""
    script = planner_script(brief)
    drafts = planner_drafts(brief, script)
    if not drafts:
        return [Read(str(brief_path)), Say("The ticket gives me nothing to plan.")]
    first, _ = drafts[0]
    actions: list[Action] = [Read(str(brief_path)), Read(str(brief.plan.parent / "ticket.md"))]
    read = dict.fromkeys(path for draft, _ in drafts
                         for path in grounding(sections_of(str(draft.get("body", "")))
                                               .get("grounding", "")))
    actions += [Read(str(brief.worktree / path)) for path in read]
    test = first.get("test")
    if isinstance(test, list):
        actions.append(Shell(f"{shlex.join(map(str, test))} 2>&1; echo handoff-exit=$?",
                             str(brief.worktree)))
    for _, text in drafts:
        actions += [Write(str(brief.report), _const(text)),
                    Shell(f"{shlex.join(brief.submit)}; echo handoff-exit=$?",
                          str(brief.worktree))]
        filed = len(actions) - 1
        if filed < len(results) and EXIT.findall(results[filed])[-1:] == ["0"]:
            break
    return [*actions, Say("I filed the plan.")]


def implement(brief: Brief, script: Script) -> list[Action]:
    worktree = brief.worktree
    actions: list[Action] = []
    for edit in (e for e in listed(script.get("edits")) if isinstance(e, dict)):
        path = str(worktree / str(edit["file"]))
        if "content" in edit:
            actions.append(Write(path, _const(str(edit["content"]))))
        else:
            actions += [Read(path), Edit(path, str(edit["replace"]), str(edit["with"]))]
    who = "" if brief.role == "implementer" else f" ({brief.role})"
    message = shlex.quote(f"{brief.ticket}: round {brief.round}{who}")
    if not script.get("edits") and brief.kind == "tester":
        return actions  # nothing to add: the tester reports the commit it was given
    actions.append(Shell(f"git add -A && git commit -q -m {message}; echo handoff-exit=$?",
                         str(worktree)))
    return actions


def implementer_report(brief: Brief, script: Script) -> Callable[[], str]:
    def render() -> str:
        head = _head(brief.worktree)
        return (f"---\nstatus: {script.get('status', 'done')}\ncommit: '{head}'\n---\n"
                f"## Changes\nRound {brief.round} of the plan.\n\n## Verification\n"
                "Committed; the orchestrator runs the gate.\n\n## Deviations\nNone\n\n"
                f"## Open questions\n{script.get('question', 'None')}\n")
    return render


def review(brief: Brief) -> list[Action]:
    return [Shell(f"{shlex.join(argv)} 2>&1; echo handoff-exit=$?", str(brief.worktree))
            for argv in brief.tests]


def reviewer_report(brief: Brief, own: Script, results: Sequence[str]) -> Callable[[], str]:
    def render() -> str:
        worktree = brief.worktree
        failures: list[Failure] = []
        ran: list[str] = []
        # results: [brief read, test 1, test 2, …]
        for argv, output in zip(brief.tests, results[1:], strict=False):
            code = EXIT.findall(output)
            ran.append(f"`{shlex.join(argv)}` exit {code[-1] if code else '?'}")
            if code and code[-1] == "0":
                continue
            failures.append(failure(list(argv), output, worktree))
        return review_report(brief, own, failures, ran)
    return render


def _head(worktree: Path) -> str:
    return subprocess.run(["git", "-C", str(worktree), "rev-parse", "HEAD"], capture_output=True,
                          text=True, timeout=30, check=True).stdout.strip()


def _const(text: str) -> Callable[[], str]:
    return lambda: text

"""The built-in scripted agent: a real program that runs in a pane like a coding CLI.

    python -m handoff.peer.scripted_agent ROLE "Read and follow /abs/brief-N.md"

(Started with ROLE alone, it waits at once for its first message: a warm reviewer's start,
handoff.loop.crew.) It reads its brief (YAML frontmatter), acts, files its report with the brief's submit
command, then waits on its terminal for the next "Read and follow …" message, like a TUI. Its
kind (implementer, tester, reviewer) is the brief's.

Implementer: applies the round's `handoff-script` block from the plan (edits, then commit),
runs the verification command, submits. Tester: the same with the block's `<role>:` part,
committing in its detached checkout. Reviewer: runs the test commands at the commit in its
own worktree; a failure becomes a must-fix naming the failing file and line, unless it is an
earlier finding of the ledger, which it then answers not-fixed (each other earlier finding:
fixed); a later round's new failure names criterion AC0 (the plan's tests pass).

Script keys (per round): edits [{file, replace, with} | {file, content}], status, question,
commit (default true), leave_untracked [files], report (raw text to submit), exit (die with
this code before reporting; exit_unless: not once this file exists in the ticket directory),
pause_until (wait for this file in the ticket directory before acting), pause_before_report
(the same, after committing and before filing), silent (once: the first turn ends without
filing the report, a nudge files it; always: never files one), reviewer: {hang: once (first
launch hangs, busy, never reporting), pause_until, pause_after_report (after filing, wait for
this file: its turn stays open), silent, must_fix [{file, line, reason,
criterion}] (raised besides the test failures), ledger {F1: not-fixed}, weakened {W1:
unjustified} and unrequested {U1: unjustified} (answers besides the defaults; with
ignore_unrequested: true it answers none), quota: first (its first launch of the round shows
a usage-limit message and stops), report (raw text to submit)}; the same under a
role's own name for any other reviewer or tester (`security: {must_fix: …}`).

A line typed into its terminal with a leading "!" runs at once as a shell command of its own,
whatever it is doing (as in Claude Code's bash mode): how a person, or a test, runs a command
in the peer's own session.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import yaml

from handoff.peer.scripted_brief import Brief, Script, listed, words
from handoff.peer.scripted_review import Failure, failure, review_report
from handoff.protocol.frontmatter import split
from handoff.protocol.plan import parse as parse_plan
from handoff.protocol.reports import template
from handoff.role import NAME
from handoff.signs import EXIT, PROMPT, QUOTA, SIGNALS_VARIABLE, STOP, TOOK, WAITING
from handoff.verdicts import Status

MESSAGE = "Read and follow "
PASTE_MARKS = re.compile(r"\x1b\[20[01]~")
IDENTITY = ["-c", "user.name=handoff scripted agent", "-c", "user.email=scripted@handoff.invalid"]


def say(text: str) -> None:
    print(text, flush=True)


def signal(event: str) -> None:
    """Tell the orchestrator a turn started or ended, as a real CLI's hooks do: one JSON file
    in the signal folder, written aside and renamed in whole."""
    folder = os.environ.get(SIGNALS_VARIABLE)
    if not folder:
        return
    try:
        handle, staged = tempfile.mkstemp(prefix=f".{event}.", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            # named as Claude Code's hooks are, whose signals these stand in for
            named = {PROMPT: "UserPromptSubmit", STOP: "Stop"}.get(event, event)
            out.write(json.dumps({"hook_event_name": named, "source": "scripted agent"}))
        os.replace(staged, Path(folder) / f"{event}.{Path(staged).name.rsplit('.', 1)[-1]}.json")
    except OSError:
        pass  # a hint only, like a CLI's hook: the screen and the report still tell


def git(cwd: Path, *args: str) -> str:
    # git never needs the terminal; keep it off the pane's pty
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True,
                          check=True, timeout=60, stdin=subprocess.DEVNULL).stdout.strip()


def run_command(argv: list[str], cwd: Path) -> tuple[int, str]:
    say(f"$ {' '.join(argv)}")
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    output = done.stdout + done.stderr
    show(output)
    return done.returncode, output


def show(output: str) -> None:
    """What a command printed, each line indented as a coding CLI shows a tool's output: what
    the code under test prints can never pass for the agent's own lines ("scripted: waiting
    for the next message"), which say from outside whether its turn is over."""
    for line in output.rstrip().splitlines():
        say(f"  │ {line}")


def bash_mode(command: str, cwd: Path) -> None:
    """A command a person typed with a leading "!", as in Claude Code's bash mode: run at once,
    whatever the agent is doing, in a shell of the agent's own (as a coding CLI runs its
    commands), its output shown."""
    say(f"scripted: running {command}")
    try:
        done = subprocess.run(["sh", "-c", command], cwd=cwd, capture_output=True, text=True,
                              timeout=600, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        say(f"scripted: could not run it: {exc}")
        return
    show(done.stdout + done.stderr)
    say(f"scripted: ran it (exit {done.returncode})")


def submit(brief: Brief, text: str) -> bool:
    """File text as the brief's report; whether `handoff submit` accepted it."""
    if brief.silent:
        say("scripted: not filing my report (silent, as the plan says)")
        return False
    draft = brief.report
    draft.parent.mkdir(parents=True, exist_ok=True)
    draft.write_text(text, encoding="utf-8")
    done = subprocess.run(brief.submit, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)
    show(done.stdout + done.stderr)
    return done.returncode == 0


def pause(brief: Brief, name: object) -> None:
    """Hold still until a file appears, like an agent thinking for a long time: in the ticket
    directory, or in the role's own drafts folder (all of the ticket directory a sandboxed
    tester or reviewer sees)."""
    if not name:
        return
    flags = [brief.plan.parent / str(name), brief.report.parent / str(name)]
    say(f"scripted: paused until {flags[0]} exists")
    while not any(flag.exists() for flag in flags):
        time.sleep(0.05)


def own_script(brief: Brief) -> Script | None:
    """The round's script for the brief's role: the block itself for the implementer, the
    block's part under the role's name for any other (None: the plan has no step for it)."""
    plan = parse_plan(brief.plan.read_text(encoding="utf-8"))
    block = plan.scripts.get(brief.round)
    if brief.role == "implementer" or block is None:
        return block
    part = block.get(brief.role)
    return part if isinstance(part, dict) else ({} if brief.kind != "tester" else None)


def implement(brief: Brief) -> None:
    """The implementer's round, or a tester's (its commits in its detached checkout)."""
    worktree, n = brief.worktree, brief.round
    script = own_script(brief)
    pause(brief, script.get("pause_until") if script else None)
    if script is None and brief.kind == "tester":
        script = {}  # a tester with no step commits nothing: the tests it found suffice
    if script is None:
        head = git(worktree, "rev-parse", "HEAD")
        report = template("implementer", head).replace("status: done", "status: blocked")
        report = report.replace("Questions for a person, or 'None'.",
                                f"The plan has no scripted step for round {n}: what should I do?")
        submit(brief, report)
        return
    edits = [e for e in listed(script.get("edits")) if isinstance(e, dict)]
    for edit in edits:
        path = worktree / str(edit["file"])
        path.parent.mkdir(parents=True, exist_ok=True)
        if edit.get("delete"):
            path.unlink(missing_ok=True)
        elif "content" in edit:
            path.write_text(str(edit["content"]), encoding="utf-8")
        else:
            old = path.read_text(encoding="utf-8")
            path.write_text(old.replace(str(edit["replace"]), str(edit["with"])),
                            encoding="utf-8")
        say(f"edited {edit['file']}")
    if script.get("commit", True) and git(worktree, "status", "--porcelain"):
        git(worktree, "add", "-A")
        what = "" if brief.role == "implementer" else f" ({brief.role})"
        git(worktree, *IDENTITY, "commit", "-q", "-m", f"{brief.ticket}: round {n}{what}")
    for name in words(script.get("leave_untracked")):
        (worktree / name).write_text("scratch\n", encoding="utf-8")
    unless = script.get("exit_unless")
    spared = bool(unless) and (brief.plan.parent / str(unless)).exists()
    if "exit" in script and not spared:
        say(f"scripted: exiting with {script['exit']} as the plan says")
        raise SystemExit(int(str(script["exit"])))
    pause(brief, script.get("pause_before_report"))
    head = git(worktree, "rev-parse", "HEAD")
    verification = "No verification command in the plan."
    if brief.test:
        code, output = run_command(list(brief.test), worktree)
        tail = output.strip().splitlines()[-1:] or [""]
        verification = f"`{' '.join(brief.test)}` exited {code}: {tail[0]}"
    if "report" in script:
        submit(brief, str(script["report"]).replace("HEAD", head))
        return
    status = script.get("status", Status.DONE.value)
    question = script.get("question", "None")
    submit(brief, (
        f"---\nstatus: {status}\ncommit: '{head}'\n---\n## Changes\n"
        f"Applied the plan's round {n} step ({len(edits)} edit(s)).\n\n"
        f"## Verification\n{verification}\n\n## Deviations\nNone\n\n"
        f"## Open questions\n{question}\n"))


def review(brief: Brief) -> None:
    worktree, commit = brief.worktree, brief.commit
    behaviour = own_script(brief) or {}
    pause(brief, behaviour.get("pause_until"))
    if behaviour.get("hang") == "once":
        marker = brief.report.with_suffix(".hung")
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text("hung once\n", encoding="utf-8")
            say("scripted: hanging as the plan says (recycle me)")
            threading.Event().wait()  # busy for good, like a CLI stuck mid-turn
    head = git(worktree, "rev-parse", "HEAD")
    failures: list[Failure] = []
    if head != commit:
        failures.append({"file": ".", "line": 0,
                         "reason": f"worktree is at {head[:10]}, not the commit under review"})
    ran = []
    for argv in brief.tests:
        code, output = run_command(list(argv), worktree)
        ran.append(f"`{shlex.join(argv)}` exit {code}")
        if code != 0:
            failures.append(failure(list(argv), output, worktree))
    if "report" in behaviour:
        submit(brief, str(behaviour["report"]).replace("COMMIT", commit))
    else:
        submit(brief, review_report(brief, behaviour, failures, ran))
    pause(brief, behaviour.get("pause_after_report"))


#: the scripted planner's script, in the ticket's text: `~~~handoff-planner` YAML `~~~` (a
#: tilde fence: its drafts hold the plan's own backtick-fenced `handoff-script` blocks)
PLANNER_BLOCK = re.compile(r"^~~~handoff-planner[ \t]*\n(.*?)^~~~[ \t]*$", re.M | re.S)


def planner_script(brief: Brief) -> Script:
    """The ticket's `handoff-planner` block: `drafts` (a list of {body, test, review,
    may_change, after, status}, or `drafts_N` for draft N) and `pause_until` (a file in the
    ticket folder or the planner's drafts folder)."""
    ticket = (brief.plan.parent / "ticket.md").read_text(encoding="utf-8")
    found = PLANNER_BLOCK.search(ticket)
    block = yaml.safe_load(found.group(1)) if found else None
    return block if isinstance(block, dict) else {}


def planner_drafts(brief: Brief, script: Script) -> list[tuple[Script, str]]:
    """Each draft of the brief's round with the report that files it: the draft's frontmatter
    gets the brief's ticket, round, role and base commit."""
    drafts = [d for d in listed(script.get(f"drafts_{brief.round}", script.get("drafts")))
              if isinstance(d, dict)]
    out: list[tuple[Script, str]] = []
    for draft in drafts:
        head: dict[str, object] = {"ticket": brief.ticket, "round": brief.round,
                                   "role": brief.role, "commit": brief.commit,
                                   "status": draft.get("status", "done")}
        head.update({key: draft[key] for key in ("test", "review", "may_change", "after")
                     if key in draft})
        out.append((draft, "---\n" + yaml.safe_dump(head, sort_keys=False) + "---\n"
                    + str(draft.get("body", ""))))
    return out


def plan_ticket(brief: Brief) -> None:
    """The planner's turn: its drafts filed in order until one is accepted (as a CLI mends
    what submit said and files again)."""
    script = planner_script(brief)
    pause(brief, script.get("pause_until"))
    drafts = planner_drafts(brief, script)
    if not drafts:
        say("scripted: the ticket has no handoff-planner drafts for me")
        return
    for _, text in drafts:
        if submit(brief, text):
            return


def handle(role: str, message: str) -> None:
    path = brief_path(message)
    if path is None:
        say(f"scripted: ignoring {message!r}")
        return
    say(f"{TOOK} {message.strip()}")
    signal(PROMPT)
    fields, _ = split(path.read_text(encoding="utf-8"))
    brief = Brief.read(fields)
    brief = replace(brief, silent=silent(brief, nudged=not message.lstrip().startswith(
        "Read and follow")))
    if brief.kind != "planner" and quota_spent(brief):
        return
    {"reviewer": review, "planner": plan_ticket}.get(brief.kind, implement)(brief)
    say(WAITING)
    signal(STOP)


def brief_path(message: str) -> Path | None:
    """The brief a message names: the word after "Read and follow", bare or shell-quoted."""
    _, found, rest = message.partition(MESSAGE)
    if not found:
        return None
    words = shlex.shlex(rest, posix=True)
    words.whitespace_split = True
    try:
        word = words.get_token()
    except ValueError:  # an unclosed quote
        return None
    return Path(word) if word and word.endswith(".md") else None


def quota_spent(brief: Brief) -> bool:
    """The plan's `quota: first` for this role: its first launch of the round shows a CLI's
    usage-limit message and does nothing more (handoff hands the role to its fallback); a
    marker in its drafts folder makes the next launch work."""
    if (own_script(brief) or {}).get("quota") != "first":
        return False
    marker = brief.report.parent / f".quota-spent-{brief.round}"
    if marker.exists():
        return False
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("spent\n", encoding="utf-8")
    say(QUOTA)
    return True


def silent(brief: Brief, nudged: bool) -> bool:
    """The plan's `silent` for this round and role: once (until nudged) or always."""
    if brief.kind == "planner":  # it has no plan yet: its script is in the ticket's text
        return False
    mode = (own_script(brief) or {}).get("silent")
    return mode == "always" or (mode == "once" and not nudged)


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or not NAME.fullmatch(argv[0]):
        print("usage: python -m handoff.peer.scripted_agent ROLE ['Read and follow BRIEF']",
              file=sys.stderr)
        return 2
    role = argv[0]
    sys.stdout.write("\x1b[?2004h")  # bracketed paste on, like a real TUI
    say(f"handoff scripted agent — {role}")
    messages: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=listen, args=(messages,), daemon=True).start()
    if len(argv) == 2:
        handle(role, argv[1])
    else:  # started warm: it waits at its input for the brief, as a CLI with no prompt does
        say(WAITING)
    while (text := messages.get()) is not None:
        if text == EXIT:  # asked to leave, as a CLI's own exit command does
            say("scripted: leaving")
            return 0
        handle(role, text)
    return 0


def listen(messages: queue.Queue[str | None]) -> None:
    """Read the terminal all the time, as a TUI does: a "!" line runs at once (bash mode, even
    while a turn is at work or paused), every other message waits for its turn."""
    for line in sys.stdin:
        text = PASTE_MARKS.sub("", line).strip()
        if text.startswith("!"):
            threading.Thread(target=bash_mode, args=(text[1:].strip(), Path.cwd()),
                             daemon=True).start()
        elif text:
            messages.put(text)
    messages.put(None)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The `handoff` command: parse, call one core function, render. No logic of its own.

Exit codes: 0 ok (for a run: passed), 1 failed (escalated, rejected report), 2 usage,
3 not found, 4 busy (another orchestrator), 5 refused to protect work, 6 missing tool,
130 stopped by a signal.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from handoff import doctor, lifecycle, seals, tools
from handoff.config import REPO_CONFIG, config_template
from handoff.config import load as load_config
from handoff.demo import new_demo, remove_demo
from handoff.errors import HandoffError, UsageError
from handoff.inputs import PLAN_LIMIT, read_text
from handoff.orchestrator import Orchestrator
from handoff.render import describe
from handoff.repo import Repo
from handoff.store import state_home
from handoff.submission import context, file_report
from handoff.watch import Watcher
from handoff.workspace import Workspace

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Run AI coding CLIs as a small team: an implementer and a reviewer in "
                       "tmux, git worktrees per role, a bounded review loop.")

RepoOpt = Annotated[Path | None, typer.Option("--repo", help="The repository (default: here).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
OUTCOME_CODES = {"passed": 0, "closed": 0, "escalated": 1, "needs-human": 1}


def _progress(event: dict[str, Any]) -> None:
    typer.echo(describe(event))


def _run(ws: Workspace) -> int:
    state = Orchestrator(ws, _progress).run()
    if state.phase in ("passed", "escalated"):
        typer.echo(ws.tdir.final_report.read_text(encoding="utf-8"))
    return OUTCOME_CODES.get(state.phase, 130)


def _approve(ws: Workspace, yes: bool) -> bool:
    if yes:
        lifecycle.approve(ws)
        return True
    if sys.stdin is None or not sys.stdin.isatty():
        return False
    typer.echo(ws.tdir.plan_md.read_text(encoding="utf-8"))
    if typer.confirm(f"Approve this plan for {ws.tdir.ticket}?", default=False):
        lifecycle.approve(ws)
        return True
    return False


def _notes(notes: list[str]) -> None:
    """What handoff mended or worked around, said out loud (stderr: the output stays clean)."""
    for note in notes:
        typer.echo(f"note: {note}", err=True)


def _launch(ws: Workspace, foreground: bool) -> int:
    if foreground:
        return _run(ws)
    session = lifecycle.run_in_window(ws)
    typer.echo(f"{ws.tdir.ticket}: the orchestrator runs in tmux session {session}.\n"
               f"  watch:  handoff attach {ws.tdir.ticket}\n"
               f"  state:  handoff status {ws.tdir.ticket}\n"
               f"  record: {ws.tdir.path}")
    return 0


@app.command()
def init(repo: RepoOpt = None) -> None:
    """Write a commented .handoff.yaml into the repo (never overwriting one)."""
    for problem in tools.problems():
        typer.echo(f"warning: {problem}", err=True)
    implementer, reviewer, installed = doctor.pick()
    path = config_template(Repo.at(repo or Path.cwd()).top, implementer, reviewer)
    if path is None:
        typer.echo(f"{REPO_CONFIG} exists; leaving it alone")
        return
    found = ", ".join(installed) if installed else "no coding CLI (claude, codex, gemini, opencode)"
    typer.echo(f"found on PATH: {found}\nchose: implementer {implementer}, reviewer {reviewer}"
               + (" (the built-in scripted agent: install a CLI and edit the file)"
                  if not installed else ""))
    typer.echo(f"wrote {path}\nnext: handoff doctor, then handoff start TICKET --plan plan.md")


def _repo_top(repo: Path | None) -> Path | None:
    """The repo named, else the one here; None when here is no repo (a named one must be)."""
    try:
        return Repo.at(repo or Path.cwd()).top
    except HandoffError:
        if repo is not None:
            raise
        return None


@app.command(name="doctor")
def doctor_command(repo: RepoOpt = None) -> None:
    """Check tmux, git, the configured CLIs and their set-up: OK, WARN or FAIL with the fix."""
    top = _repo_top(repo)
    found = doctor.run(state_home(), top)
    if top is None:
        typer.echo("(not in a git repository: repo checks skipped; pass --repo PATH)")
    for check in found:
        typer.echo(f"{check.level:<4}  {check.what}: {check.detail}")
        if check.fix and check.level != "OK":
            typer.echo(f"      fix: {check.fix}")
    raise typer.Exit(doctor.exit_code(found))


@app.command()
def providers(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """The coding CLIs handoff can run, what is installed, and which roles use them."""
    rows = doctor.provider_rows(load_config(state_home(), _repo_top(repo)))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    typer.echo(f"{'PROVIDER':<10} {'VERSION':<10} {'ROLES':<22} {'PATH':<40} SUPPORT")
    for row in rows:
        roles = ",".join(row["roles"]) if isinstance(row["roles"], list) else ""
        typer.echo(f"{row['provider']!s:<10} {row['version'] or '-'!s:<10} {roles or '-':<22} "
                   f"{row['path'] or 'not installed'!s:<40} {row['support']}")


@app.command()
def start(
    ticket: str,
    plan: Annotated[Path, typer.Option("--plan", help="The plan (Markdown).", exists=False)],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve the plan without asking.")]
    = False,
    foreground: Annotated[bool, typer.Option("--foreground", help="Run the orchestrator in this "
                                             "terminal instead of its tmux window.")] = False,
    max_rounds: Annotated[int | None, typer.Option("--max-rounds", min=1)] = None,
    base: Annotated[str, typer.Option("--base", help="Branch or commit to start from.")]
    = "HEAD",
    summary: Annotated[str, typer.Option("--summary", help="What was asked (ticket.md).")] = "",
    repo: RepoOpt = None,
) -> None:
    """Create a ticket from a plan, approve it, and start the loop."""
    plan_text = read_text(plan, PLAN_LIMIT, "the plan")  # /dev/zero or a binary: a clear error
    ws = lifecycle.create(state_home(), lifecycle.NewTicket(
        ticket=ticket, repo=repo or Path.cwd(), plan_text=plan_text, summary=summary,
        base=base, max_rounds=max_rounds))
    changes = ws.repo.uncommitted()
    if changes:
        typer.echo(f"note: {changes} uncommitted change(s) in {ws.repo.top} are not part of "
                   f"{ticket}: it starts from {base} ({ws.state().base_commit[:10]})", err=True)
    if not _approve(ws, yes):
        typer.echo(f"{ticket} is waiting for approval: 'handoff resume {ticket} --yes' "
                   "approves it and starts the loop", err=True)
        raise typer.Exit(1)
    raise typer.Exit(_launch(ws, foreground))


@app.command()
def resume(
    ticket: str,
    foreground: Annotated[bool, typer.Option("--foreground")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve a waiting plan.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Carry a ticket on from its directory alone (after a crash, a stop or a reboot)."""
    ws, notes = lifecycle.open_to_resume(state_home(), ticket, repo)
    _notes(notes)
    if ws.state().phase == "awaiting-approval" and not _approve(ws, yes):
        raise UsageError(f"{ticket} is waiting for approval", f"handoff resume {ticket} --yes")
    raise typer.Exit(_launch(ws, foreground))


@app.command()
def status(ticket: Annotated[str | None, typer.Argument()] = None, repo: RepoOpt = None,
           as_json: JsonOpt = False) -> None:
    """Where every ticket stands (or one)."""
    rows = lifecycle.status(state_home(), ticket, repo)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no tickets yet: handoff start TICKET --plan plan.md (or try handoff demo)")
        return
    typer.echo(f"{'TICKET':<22} {'PHASE':<18} {'ROUND':<5} {'ORCHESTRATOR':<20} REPO")
    for row in rows:
        running = f"running (pid {row['orchestrator']})" if row["orchestrator"] else \
            {"finished": "-", "not started": "-"}.get(row["run"], row["run"])
        typer.echo(f"{row['ticket']:<22} {row['phase']:<18} {row['round']:<5} {running:<20} "
                   f"{Path(row['repo']).name}")
        if ticket is not None or row["reason"]:
            typer.echo(f"    {row['reason']}" if row["reason"] else "", nl=bool(row["reason"]))
        if row["error"]:
            typer.echo(f"    error: {row['error']}")
        if row["hint"]:
            typer.echo(f"    next: {row['hint']}")
        if row["events_skipped"]:
            typer.echo(f"    events.jsonl: {row['events_skipped']} unreadable line(s) skipped")
        if ticket is not None:
            typer.echo(f"    branch {row['branch']} @ {row['commit'][:10]}\n    dir {row['dir']}")


@app.command()
def log(
    ticket: str,
    as_json: JsonOpt = False,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new events.")]
    = False,
    repo: RepoOpt = None,
) -> None:
    """The handoff chain of a ticket: every event, in order (from the ticket directory alone:
    it works with state.json unreadable and with the repo gone)."""
    tdir = lifecycle.find_ticket(state_home(), ticket, repo)
    events, bad = tdir.events.read()
    if as_json:
        typer.echo(json.dumps(events, indent=2))
    else:
        for event in events:
            typer.echo(describe(event))
    if bad:
        typer.echo(f"(skipped {len(bad)} unreadable line(s) of events.jsonl: {bad[:5]})", err=True)
    if not follow:
        return
    seen = len(events)
    with Watcher([tdir.path]) as watcher:
        while True:
            watcher.wait(1.0)
            events, _ = tdir.events.read()
            for event in events[seen:]:
                typer.echo(describe(event))
            seen = len(events)


@app.command()
def attach(ticket: str, role: Annotated[str | None, typer.Option("--role")] = None,
           repo: RepoOpt = None) -> None:
    """Attach to the ticket's tmux session (Ctrl-b d detaches)."""
    argv = lifecycle.attach_argv(lifecycle.open_ticket(state_home(), ticket, repo), role)
    env = {k: v for k, v in os.environ.items() if k != "TMUX"}
    os.execvpe(argv[0], argv, env)


@app.command()
def recycle(ticket: str, role: str, repo: RepoOpt = None) -> None:
    """Kill a peer and start it fresh on its current brief."""
    brief = lifecycle.recycle(lifecycle.open_ticket(state_home(), ticket, repo), role)
    typer.echo(f"{role} of {ticket} restarted on {brief}")


@app.command()
def submit(
    report: Path,
    directory: Annotated[str | None, typer.Option("--dir", help="The ticket directory.")] = None,
    role: Annotated[str | None, typer.Option("--role")] = None,
    round_: Annotated[int | None, typer.Option("--round")] = None,
) -> None:
    """File a report (run by a peer). Prints every problem, exit 1, when it is not accepted."""
    folder, who = context(directory, role, round_)
    filed, problems = file_report(folder, who, round_, report, os.environ.get(seals.ENV, ""))
    if problems:
        typer.echo(f"handoff: report NOT accepted ({len(problems)} problem(s)); mend it and "
                   "submit again:", err=True)
        for problem in problems:
            typer.echo(f"  - {problem}", err=True)
        raise typer.Exit(1)
    typer.echo(f"handoff: report accepted, filed as {filed}")


@app.command()
def answer(ticket: str, text: str, repo: RepoOpt = None) -> None:
    """Answer a blocked ticket; the implementer carries on with the answer."""
    ws = lifecycle.open_ticket(state_home(), ticket, repo)
    path = lifecycle.answer(ws, text)
    typer.echo(f"answer filed as {path}")
    if lifecycle.orchestrator_running(ws) is None:
        lifecycle.run_in_window(ws)
        typer.echo(f"orchestrator restarted in tmux; watch with handoff attach {ticket}")


@app.command()
def stop(ticket: str, repo: RepoOpt = None) -> None:
    """Stop the orchestrator and the peers; 'handoff resume' carries on later."""
    result = lifecycle.stop_ticket(state_home(), ticket, repo)
    _notes(result["notes"])
    typer.echo(f"{ticket} stopped (orchestrator: {result['orchestrator'] or 'not running'}, "
               f"peers: {'stopped' if result['session'] else 'not running'})")


@app.command()
def close(
    ticket: str,
    keep_worktrees: Annotated[bool, typer.Option("--keep-worktrees")] = False,
    force: Annotated[bool, typer.Option("--force", help="Discard uncommitted work in the "
                                        "worktrees.")] = False,
    repo: RepoOpt = None,
) -> None:
    """Stop the peers, remove the worktrees (refusing to lose work), keep branch and record."""
    ws, result = lifecycle.close_ticket(state_home(), ticket, repo, keep_worktrees, force)
    _notes(result["notes"])
    removed = ", ".join(result["removed"]) or "none"
    if result["repo_gone"]:
        typer.echo(f"{ticket} closed; its repository is gone, with its worktrees and branch; "
                   f"record in {ws.tdir.path}")
    else:
        typer.echo(f"{ticket} closed; worktrees removed: {removed}; branch {result['branch']} "
                   f"kept; record in {ws.tdir.path}")
    if result["discarded_work"]:
        typer.echo(f"the implementer's uncommitted work was saved as {result['discarded_work']} "
                   "(git apply it to get it back)")


@app.command()
def demo(keep: Annotated[bool, typer.Option("--keep", help="Leave the session and worktrees "
                                            "for 'handoff attach'.")] = False) -> None:
    """Run the whole loop on a throwaway repo with the scripted agents (no AI needed)."""
    started = time.monotonic()
    os.environ.setdefault("HANDOFF_TMUX_SOCKET", "handoff-demo")
    ticket, repo, plan_text = new_demo()
    typer.echo(f"demo repo: {repo} (word_count has a bug; its tests fail)")
    try:
        ws = lifecycle.create(state_home(), lifecycle.NewTicket(
            ticket=ticket, repo=repo, plan_text=plan_text, summary="Fix word_count."))
    except HandoffError:
        remove_demo(repo)  # nothing was started in it
        raise
    lifecycle.approve(ws)
    code = _run(ws)
    state = ws.state()
    verdicts = ", ".join(f"round {r} {v}" for r, v in sorted(state.verdicts.items()))
    if not keep:
        lifecycle.close(ws)
    removed = not keep and remove_demo(repo)
    typer.echo(f"\ndemo {state.phase} in {time.monotonic() - started:.1f}s: {verdicts}\n"
               f"  record: {ws.tdir.path}")
    if removed:
        typer.echo("  the demo repo is removed ('handoff demo --keep' keeps it)")
    else:
        typer.echo(f"  branch: {state.branch} in {repo}")
    if keep:
        typer.echo(f"  watch:  handoff attach {ticket}\n  finish: handoff close {ticket}, "
                   f"then rm -r {repo.parent}")
    raise typer.Exit(code)


def main() -> None:
    try:
        app()
    except HandoffError as exc:
        typer.echo(f"handoff: error: {exc.message}", err=True)
        if exc.hint:
            typer.echo(f"  hint: {exc.hint}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)

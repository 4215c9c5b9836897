"""A new ticket's plan approved: what a person approves besides the plan's text (who runs,
from where, how far, with which powers), the approval itself, and the note when nobody is
there to give it."""

from __future__ import annotations

import os

from handoff.loop import drafts, notify
from handoff.loop.workspace import Workspace
from handoff.machinery import sandbox
from handoff.machinery.ticket_branch import branch_name
from handoff.phases import Phase
from handoff.protocol.reports import sections_of
from handoff.record import peerfiles
from handoff.record.store import file_digest
from handoff.record.ticket import State
from handoff.role import IMPLEMENTER


def approval_summary(ws: Workspace) -> list[str]:
    """What a person approves besides the plan's text: who runs, from where, how far, and
    with which powers (shown above the plan by `start`)."""
    state, plan = ws.state(), ws.plan()
    lines = []
    for role in state.roles.roles:
        provider = ws.provider(role.name)
        power = ("permissions bypassed: it acts without asking" if provider.mode == "bypass"
                 else f"permission mode {provider.mode}: it stops on each question")
        reach = provider.reaches(dict(os.environ))
        spec = ws.spec(role.name)
        what = role.name if role.name == role.kind else f"{role.name} ({role.kind}" + (
            f", {spec.focus}" if spec.focus else "") + ")"
        lines.append(f"{what}: {provider.name}{' (' + reach + ')' if reach else ''}; {power}")
    if state.roles.planned:  # what a person checks first: what the planner read
        read = drafts.grounding(sections_of(plan.text).get("grounding", ""))
        lines.insert(0, f"drafted by the planner (draft {state.round}) from the ticket's text; "
                     f"it read: {', '.join(read[:12]) + (' …' if len(read) > 12 else '')}")
    lines += independence(ws)
    if ws.config.scanners:
        lines.append("scanners: " + ", ".join(
            s.name + ("" if s.required else " (optional)") for s in ws.config.scanners))
    lines.append(f"base: {state.base} at {state.base_commit[:12]}; branch {branch_name(state.ticket)}")
    gate = " ".join(plan.test) if plan.test else \
        "none (the plan names no test command, and the repository's config no test:)"
    if plan.test and plan.test == ws.config.test and not own_test(ws):
        gate += " (the repository's test:)"
    lines.append(f"rounds: at most {state.max_rounds} review round(s); gate: {gate}")
    lines.append(sandbox_line(ws))
    return lines


def independence(ws: Workspace) -> list[str]:
    """A warning when every reviewer runs on the implementer's CLI: one model family reviewing
    its own work finds less (the review still runs)."""
    state = ws.state()
    implementer = ws.spec(IMPLEMENTER).provider
    if implementer in ("scripted", "command") or any(
            ws.spec(r).provider != implementer for r in state.roles.reviewers):
        return []
    return [f"note: every reviewer runs on {implementer}, the implementer's CLI: the review is "
            "not independent (a reviewer on another installed CLI finds more)"]


def sandbox_line(ws: Workspace) -> str:
    """The sandbox in force, in one line (UsageError for sandbox: on where it cannot be)."""
    found = ws.sandbox()
    if found is not None:
        return (f"sandbox: {found.why}: each peer writes only its worktree (the implementer "
                "and testers also the commits they make; handoff alone moves the branch), its "
                "CLI's state and its drafts; it sees no credentials, no other ticket, no other "
                "process; the network stays open")
    if ws.config.sandbox.mode == "off":
        return ("sandbox: off (your config): the peers run as you, with whatever your user can "
                "read and write; only what they commit on the branch is judged")
    return (f"sandbox: none, {sandbox.support().why}: the peers run as you, with whatever your "
            "user can read and write (handoff doctor says how to mend it)")


def approve(ws: Workspace) -> State:
    state = ws.state()
    if state.phase != Phase.AWAITING_APPROVAL:
        return state
    state.round = 1
    state.plan_digest = file_digest(ws.tdir.plan_md)
    if state.after:  # it starts once they have passed, from their work (the orchestrator)
        ws.tdir.move(state, Phase.WAITING, f"plan approved; it waits for {', '.join(state.after)}")
    else:
        ws.tdir.move(state, Phase.IMPLEMENTING, "plan approved")
    return state


def ask_for_approval(ws: Workspace) -> None:
    """Nobody answered the approval prompt (no terminal): the person is told the plan waits."""
    state = ws.state()
    notify.approval_wanted(state, ws.config.notify, ws.repo.top, lambda kind, **fields: (
        ws.tdir.events.append(kind, round=state.round, **fields)))


def refuse(ws: Workspace, how: str) -> str:
    """The person said no to the plan (how: `no`, or Ctrl-C at the prompt). No means no: the
    ticket is not left waiting for an approval nobody will give. Nothing was made for it but
    its record (no worktree, branch or peer comes before approval), and that goes too, so the
    id is free for the mended plan. What to tell them."""
    from handoff.operations.closing import close

    state = ws.state()
    if state.phase != Phase.AWAITING_APPROVAL:  # approved meanwhile (the board): it stands
        return f"{ws.tdir.ticket} was approved meanwhile: it goes on"
    close(ws, reason=f"its plan was not approved ({how})")  # its ports, were any booked
    peerfiles.remove_tree(ws.tdir.path.parent, ws.tdir.path)
    return (f"{ws.tdir.ticket} was not started: its plan was not approved ({how}); nothing of "
            f"it is kept (start it again, with the mended plan, under the same id)")


def own_test(ws: Workspace) -> bool:
    """The plan names its own test command (else the gate is the repository's, or none)."""
    from handoff.protocol import plan as plan_mod

    return plan_mod.parse(ws.tdir.plan_md.read_text(encoding="utf-8")).test is not None

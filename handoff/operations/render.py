"""Events as one line of text each: shared by `handoff log`, foreground progress and the demo."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from handoff.machinery.repo import short_sha
from handoff.record.usage import Usage, short

#: what every event has; the rest is its own
EVENT_KEYS = ("time", "kind", "round", "role")


def event_line(event: Mapping[str, object]) -> str:
    """An event as read back from events.jsonl: any line's fields may be missing or of another
    shape (an older handoff's, a damaged line), so each is narrowed where it is shown."""
    kind, role = str(event.get("kind", "?")), str(event.get("role", ""))
    n = event.get("round", 0)
    time = str(event.get("time", ""))[11:19]
    who = f"{role} " if role else ""
    text = _TEXT.get(kind, _generic)(event)
    return f"{time}  r{n}  {who}{text}".rstrip()


def _generic(event: Mapping[str, object]) -> str:
    extra = {k: v for k, v in event.items() if k not in EVENT_KEYS}
    return f"{event.get('kind')} {extra}" if extra else str(event.get("kind"))


def _phase(event: Mapping[str, object]) -> str:
    reason = f" ({event['reason']})" if event.get("reason") else ""
    return f"phase {event.get('from')} → {event.get('to')}{reason}"


def _verdict(event: Mapping[str, object]) -> str:
    text = f"verdict {str(event.get('verdict', '?')).upper()} at {short_sha(str(event.get('commit')))}"
    for finding in listed(event.get("must_fix"))[:3]:
        text += f"\n      must-fix {finding}"
    if event.get("ledger"):
        text += f"\n      earlier findings: {', '.join(words(event['ledger']))}"
    if event.get("weakened"):
        text += f"\n      weakened tests: {', '.join(words(event['weakened']))}"
    return text


def _reviews(event: Mapping[str, object]) -> str:
    verdicts = event.get("verdicts")
    each = ", ".join(f"{role} {verdict}" for role, verdict in
                     (verdicts.items() if isinstance(verdicts, dict) else ()))
    still = words(event.get("open"))
    return (f"round verdict {str(event.get('verdict', '?')).upper()} ({each})"
            + (f"; open findings {', '.join(still)}" if still else ""))


def _scanner(event: Mapping[str, object]) -> str:
    optional = "" if event.get("required", True) else " (optional)"
    return f"scanner {event.get('name')}{optional} {event.get('state')}: {event.get('summary', '')}"


def _submission(event: Mapping[str, object]) -> str:
    if event.get("accepted"):
        said = event.get("status") or event.get("verdict") or ""
        commit = short_sha(str(event.get("commit") or ""))
        return f"report accepted: {event.get('report')}" + (f" ({said} at {commit})" if said else "")
    if event.get("filed") is False:  # refused at `handoff submit`: nothing was filed
        return "handoff submit refused: " + "; ".join(words(event.get("problems")))
    return f"report rejected: {event.get('report')}: " + "; ".join(words(event.get("problems")))


def _gate(event: Mapping[str, object]) -> str:
    if event.get("result") == "running":
        return f"gate running {' '.join(words(event.get('command')))}"
    return f"gate {event.get('result')}: {event.get('summary', event.get('reason', ''))}"


def _usage(event: Mapping[str, object]) -> str:
    source = f" — {_name(event['source'])}" if event.get("source") else ""
    return f"used {short(Usage.of(event))}{source}"


def _budget(event: Mapping[str, object]) -> str:
    if event.get("over") == "cost_usd":
        return f"over budget: ${event.get('total')} spent, the budget is ${event.get('limit')}"
    total, limit = event.get("total"), event.get("limit")
    shown = [f"{n:,}" if isinstance(n, int) else str(n) for n in (total, limit)]
    return f"over budget: {shown[0]} tokens used, the budget is {shown[1]}"


def _worktree(event: Mapping[str, object]) -> str:
    done = "worktree made again" if event.get("created") else "worktree checked"
    if event.get("displaced"):
        done += f" (what stood there was moved aside to {event['displaced']})"
    if event.get("setup"):
        done += "; its setup ran"
    return f"{done}: {event.get('path')}"


def _config(event: Mapping[str, object]) -> str:
    if event.get("reread") is False:
        return f"configuration not re-read: {event.get('error')}; the run's own stays"
    return "configuration re-read after the answer: " + ", ".join(words(event.get("changed")))


_TEXT: dict[str, Callable[[Mapping[str, object]], str]] = {
    "config": _config,
    "created": lambda e: f"ticket created at base {short_sha(str(e.get('base_commit')))}",
    "phase": _phase,
    "launch": lambda e: "launched"
    + (f" ({e['provider']})" if e.get("provider") else "")
    + (f" on {_name(e['brief'])}" if e.get("brief") else "")
    + (f" [{e['reason']}]" if e.get("reason") else ""),
    "brief": lambda e: f"briefed with {_name(e.get('brief'))} (by {e.get('by')})",
    "recycle": lambda e: f"recycled by {e.get('by')}",
    "left": lambda e: f"left: {e.get('reason')} (its pane history is in transcripts/"
                      + (", its window kept)" if e.get("pane") == "kept" else ")"),
    "submitted": lambda e: f"filed {e.get('report')}",
    "submission": _submission,
    "gate": _gate,
    "verdict": _verdict,
    "reviews": _reviews,
    "scanner": _scanner,
    "weakened": lambda e: "tests weakened since the base: " + "; ".join(words(e.get("tests"))[:5]),
    "branch": lambda e: f"ticket branch {e.get('branch')} moved to {short_sha(str(e.get('commit')))}"
                        f" ({e.get('by')})",
    "death": lambda e: f"died (exit {e.get('exit_status')})"
                       + (f": {e['limit']}" if e.get("limit") else "")
                       + f"; relaunch {e.get('relaunches')}",
    "final-report": lambda e: f"final report written: {e.get('outcome')}",
    "answer": lambda e: f"answered ({e.get('file')})",
    "error": lambda e: f"orchestrator stopped on an error in {e.get('phase')}: {e.get('message')}",
    "stopped": lambda e: "stopped" + (f" by {e['by']}" if e.get("by") else ""),
    "orchestrator": lambda e: f"orchestrator running (pid {e.get('pid')})",
    "worktrees": lambda e: "worktrees ready: " + ", ".join(
        f"{role} {path}" for role, path in e.items() if role not in EVENT_KEYS),
    "session": lambda e: f"tmux session {e.get('session')} on socket {e.get('socket')}",
    "peer": lambda e: f"is {e.get('state')} — {e.get('evidence')}",
    "dialog": lambda e: f"answered {e.get('state')} with {'+'.join(words(e.get('keys')))}: "
                        f"{e.get('answered')} — {e.get('evidence')}",
    "nudge": lambda e: f"nudged ({'taken' if e.get('delivered') else 'NOT taken: ' + str(e.get('why'))})"
                       f" — {e.get('evidence')}",
    "escalate": lambda e: f"needs a person: {e.get('state')} — {e.get('evidence')}\n"
                          f"      fix: {e.get('fix')}\n      screen: transcripts/{e.get('screen')}",
    "screen-unrecognised": lambda e: f"cannot be read ({e.get('provider')} {e.get('version')}): "
                                     f"{e.get('evidence')}\n      fix: {e.get('fix')}\n"
                                     f"      screen: transcripts/{e.get('screen')}",
    "answer-passed-on": lambda e: "told the answer" if e.get("delivered")
    else f"could not be told the answer ({e.get('why')}): restarted",
    "tmux": lambda e: f"tmux {e.get('state')}" + (f": {e['message']}" if e.get("message") else "")
    + (f" again after {e['after']:.0f}s" if isinstance(e.get("after"), (int, float)) else "")
    + (f"; giving up after {e['patience']:.0f}s" if isinstance(e.get("patience"), (int, float))
       else ""),
    "watch": lambda e: f"watching by {e.get('state')} every {e.get('every')} s: {e.get('reason')}",
    "state-restored": lambda e: f"state.json restored from {e.get('source', 'its backup')}"
    + (f"; the damaged file kept as {e['kept']}" if e.get("kept") else ""),
    "worktree": _worktree,
    "usage": _usage,
    "budget": _budget,
    "more-rounds": lambda e: f"{e.get('more')} more round(s) given by {e.get('user') or e.get('by')}"
                             f" (stopped at {e.get('bound')})",
    "finish": lambda e: f"finished: {e.get('mode')} into {e.get('base')}, "
                        f"{short_sha(str(e.get('before')))} → {short_sha(str(e.get('after')))}",
    "pushed": lambda e: f"pushed {short_sha(str(e.get('commit')))} to {e.get('remote')} as "
                        f"{e.get('branch')}" + (f": {e['pull_request']}" if e.get("pull_request")
                                                else ""),
    "waiting": lambda e: (f"starts from {short_sha(str(e.get('base')))}: {e.get('reason')}"
                          if e.get("base") else str(e.get("reason"))),
    "onto": lambda e: f"carried onto {e.get('onto')} ({short_sha(str(e.get('before')))} → "
                      f"{short_sha(str(e.get('after')))}): "
                      + (f"conflicts in {', '.join(words(e['conflicts']))} left to resolve"
                         if e.get("conflicts") else f"merged at {short_sha(str(e.get('merged')))}"),
    "merge-check": lambda e: f"merged with {', '.join(words(e.get('tickets')))} into "
                             f"{e.get('base')}: {str(e.get('result')).upper()} — {e.get('summary')}",
    "forgery": lambda e: (f"FORGED report set aside as {e.get('report')}: {e.get('why')}"
                          if e.get("report") else f"FORGED submit refused: {e.get('why')}"),
    "voided": lambda e: f"report set aside as {e.get('report')}, not taken: {e.get('why')}",
    "tampered": lambda e: f"refused to act on a peer's file: {e.get('evidence')}",
    "verdict-kept": lambda e: f"verdict {str(e.get('verdict')).upper()} stands: {e.get('why')}",
    "delivery-failed": lambda e: f"delivery-failed of {_name(e.get('brief'))}: {e.get('why', '')}",
    "intake": lambda e: f"intake connection of pid {e.get('pid') or '?'} cut: {e.get('why')}",
    "notified": lambda e: f"told the person: {e.get('notice')} (via {', '.join(words(e['via']))})"
    if e.get("via") else f"{e.get('notice')}: reached no one (no attached client, desktop "
                         "notifier or notify command took it)",
    "notify-failed": lambda e: f"could not tell the person ({e.get('notice')}) by "
                               f"{e.get('channel')}: {e.get('reason')}",
}


def listed(value: object) -> list[object]:
    """A list an event holds ([] for anything else)."""
    return value if isinstance(value, list) else []


def words(value: object) -> list[str]:
    """A list an event holds, each item as text ([] for anything else)."""
    return [str(item) for item in listed(value)]


def _name(path: object) -> str:
    text = str(path or "")
    return "/".join(text.split("/")[-2:])

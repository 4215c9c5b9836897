"""`handoff submit`, as a peer runs it for every report: a short process that hands the report
to the running orchestrator (handoff.protocol.intake) and prints its verdict.

It imports only the standard library and handoff's stdlib-only modules: the orchestrator has the
repository, the validators and git loaded already, so the peer's process needs none of them. It
carries no credential: the orchestrator learns from the kernel which process is at the other
end of the socket and judges that (handoff.loop.filer). When no orchestrator listens (the
ticket is stopped), nothing is filed: the peer is told to submit again once the ticket runs.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys

from handoff.errors import EXIT_INTERRUPTED, HandoffError, UsageError, describe
from handoff.inputs import REPORT_LIMIT, read_text
from handoff.protocol import intake
from handoff.record.address import Address
from handoff.role import Team, check_name

#: how long a peer waits for the orchestrator's verdict; it answers between two looks at the
#: peers (milliseconds, or a tmux call's bound when tmux is slow)
VERDICT_WAIT = 60.0
_NO_LISTENER = (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTSOCK)
_FLAGS = {"--dir": "dir", "--role": "role", "--round": "round"}


def context(directory: str | None, role: str | None) -> tuple[str, str]:
    """The ticket directory and role from the flags, else from the peer's environment."""
    folder = directory or os.environ.get("HANDOFF_TICKET_DIR")
    who = role or os.environ.get("HANDOFF_ROLE")
    if not folder or not who:
        raise UsageError("submit needs the ticket directory and role",
                         "run the exact submit command from your brief (it passes --dir and "
                         "--role), or set HANDOFF_TICKET_DIR and HANDOFF_ROLE")
    return folder, check_name(who)


def submit(report: str | os.PathLike[str], directory: str | None, role: str | None,
           round_: int | None) -> int:
    """File report; print the verdict; the exit status (0 accepted, 1 not)."""
    folder, who = context(directory, role)
    try:
        text = read_text(report, REPORT_LIMIT, "the report")
    except UsageError as exc:
        return _print_verdict(None, [exc.message + (f" ({exc.hint})" if exc.hint else "")])
    problems = _not_awaited(folder, who, round_)
    if problems:
        return _print_verdict(None, problems)
    request: dict[str, object] = {"role": who, "round": round_, "report": text,
                                  "file": os.fspath(report)}
    verdict = hand_over(folder, request)
    if verdict is None:
        # only the running orchestrator files a report: it alone can tell which process
        # hands it over, and it alone holds the key its receipt is signed with
        return _print_verdict(None, [
            f"no orchestrator is running for this ticket, so the report cannot be filed now; "
            f"{os.fspath(report)} stays as it is: run the same command again once the ticket "
            f"runs ('handoff resume {os.path.basename(folder)}' by a person)"])
    return _print_verdict(*verdict)


def _not_awaited(folder: str, role: str, round_: int | None) -> list[str]:
    """What the ticket's state already says against the report, read without the orchestrator
    (which answers only while it waits for a report: a report out of turn would wait on it)."""
    try:
        with open(os.path.join(folder, "state.json"), encoding="utf-8") as record:
            state = json.load(record)
        phase, current = str(state["phase"]), int(state["round"])
        team = Team.from_records(state.get("team") or [])
    except FileNotFoundError:
        if os.path.isdir(os.path.dirname(os.path.join(folder, intake.SOCKET))):
            return []  # a tester's or reviewer's view of the folder: no state to read
        return [f"{folder} is not a handoff ticket directory (no state.json)"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError, UsageError):
        return []  # unreadable now: whoever judges the report reads it properly
    if not team.has(role):
        return [f"this ticket has no role {role!r} (its roles: {', '.join(team.names)})"]
    refused = intake.refusal(phase, current, role, current if round_ is None else round_,
                             team.kind(role))
    return [refused] if refused else []


def hand_over(folder: str | os.PathLike[str],
              request: dict[str, object]) -> tuple[str | None, list[str]] | None:
    """The orchestrator's verdict on request (where it filed the report, or the problems);
    None when no orchestrator listens."""
    with Address(os.fspath(folder), intake.SOCKET) as address, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(VERDICT_WAIT)
        try:
            sock.connect(address.path)
        except OSError as exc:
            if exc.errno in _NO_LISTENER:
                return None
            raise HandoffError("cannot reach the ticket's orchestrator at "
                               f"{os.path.join(folder, intake.SOCKET)}: "
                               f"{exc.strerror or exc}", "submit again; `handoff status` shows "
                               "whether the ticket runs") from None
        try:
            sock.sendall(json.dumps(request).encode() + b"\n")
            reply = _read_reply(sock)
        except TimeoutError:
            raise HandoffError(
                f"the ticket's orchestrator did not answer within {VERDICT_WAIT:.0f} s; "
                "nothing was filed", "submit again; `handoff status` shows what the ticket "
                "is doing") from None
        except OSError:
            reply = b""
    if not reply:
        # it ended before its verdict: whatever it filed, judging here sees (already filed,
        # or filed now)
        return None
    try:
        data = json.loads(reply)
        filed, problems = data["filed"], data["problems"]
    except (ValueError, TypeError, KeyError):
        filed, problems = None, None
    if not (filed is None or isinstance(filed, str)) or not isinstance(problems, list):
        raise HandoffError("the ticket's orchestrator answered something that is not a verdict",
                           "submit again; if it repeats, `handoff log` shows what happened")
    return filed, [str(p) for p in problems]


def _read_reply(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks).strip()


def _print_verdict(filed: str | None, problems: list[str]) -> int:
    if problems or filed is None:
        problems = problems or ["nothing was filed"]
        print(f"handoff: report NOT accepted ({len(problems)} problem(s)); mend it and submit "
              "again:", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print(f"handoff: report accepted, filed as {filed}")
    return 0


def parse(argv: list[str]) -> tuple[str, dict[str, str]] | None:
    """`submit REPORT [--dir D] [--role R] [--round N]` (flag=value too); None for anything
    else (help, a typo, a missing value), which the full command line reports."""
    report: str | None = None
    flags: dict[str, str] = {}
    args = iter(argv)
    for arg in args:
        name, eq, value = arg.partition("=")
        if name in _FLAGS:
            value = value if eq else next(args, "")
            if not value or _FLAGS[name] in flags:
                return None
            flags[_FLAGS[name]] = value
        elif arg.startswith("-") or report is not None:
            return None
        else:
            report = arg
    if report is None or not flags.get("round", "0").isdigit():
        return None
    return report, flags


def main(argv: list[str]) -> int | None:
    """Run `handoff submit` from argv (after "submit"); None: not a plain submit, the full
    command line takes it."""
    parsed = parse(argv)
    if parsed is None:
        return None
    report, flags = parsed
    try:
        return submit(report, flags.get("dir"), flags.get("role"),
                      int(flags["round"]) if "round" in flags else None)
    except HandoffError as exc:
        print(describe(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED

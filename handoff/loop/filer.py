"""Who filed a report: the process that handed it over, traced to the peer's own CLI.

A reviewer runs the code under review (its tests), so whatever lets it file its verdict must
not be within reach of what that code runs. Nothing is handed to a peer for it (no seal in its
environment, no file): the kernel says which process is at the other end of the intake
socket (SO_PEERCRED), and handoff, outside the sandbox, reads that process's lineage. A report
counts only when the process filing it is

* started directly by the peer's own CLI (the scripted agent runs `handoff submit` itself), or
* started by a shell (or shells, a subshell in a shell) that the CLI started directly (a
  coding CLI runs each of its commands, `handoff submit` among them, in a shell of its own),

where the CLI is the program handoff started in the role's pane (below bubblewrap when the peer
is sandboxed) for that round (handoff.record.grants). A test of the commit under review that
runs `handoff submit` is at least one program deeper (pytest, then python, then submit), a
process it left running is an orphan of the sandbox, and a process of another peer or of
another ticket descends from another pane: all refused, and logged as forgeries with the
lineage as evidence.

What this cannot tell apart: code under review that replaces a command's own shell by
`handoff submit` (exec, where a CLI runs a command in a shell that execs its last command),
since that process then is the CLI's command. So a reviewer's or tester's report is taken
only once its turn is over (handoff.loop.orchestrator), and a fail a reviewer filed in a round
stands whatever it files after: a report filed by the code while the reviewer worked is
replaced by the reviewer's own, and cannot undo it.
"""

from __future__ import annotations

from dataclasses import dataclass

from handoff import processes
from handoff.processes import Seen

#: programs a coding CLI runs its commands in
SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})
#: the sandbox's own programs between a pane and the CLI it runs
WRAPPERS = frozenset({"bwrap"})


def identity(pid: int) -> str:
    """A process named for good: pid, start and boot ('' when it is gone)."""
    start = processes.start_time(pid)
    return f"{pid}:{start}:{processes.boot_id()}" if start else ""


def cli_of(pane_pid: int, core: tuple[str, ...] = (), relaunches: bool = False) -> int:
    """The CLI a pane runs: its program itself, or (sandboxed) the first process below
    bubblewrap's own (the pane's program is bubblewrap, its child bubblewrap's init in the
    sandbox, whose first child is the CLI); then, where the provider names the program of the
    CLI's own process under a launcher of its (core: Codex's npm launcher, a node process,
    runs the native `codex`), down to it; and where the CLI starts itself again as its one
    child (relaunches: Gemini CLI's node, with more memory), that child. 0 when none."""
    pid = pane_pid
    for _ in range(8):
        one = processes.seen(pid)
        if one is None:
            return 0
        kids = processes.children(pid)
        if one.program not in WRAPPERS and (not core or one.program in core):
            again = processes.seen(kids[0]) if relaunches and len(kids) == 1 else None
            return again.pid if again is not None and again.program == one.program else pid
        if len(kids) != 1 and one.program not in WRAPPERS:
            return 0  # a launcher that did not start exactly its CLI
        if not kids:
            return 0
        pid = kids[0]
    return 0


@dataclass(frozen=True)
class Clearance:
    """Whether a submitting process may file the role's report: '' when it may, else why
    not; evidence: its lineage, as a person reads it."""

    why: str
    evidence: str


def judge(pid: int, role: str, pane_pid: int | None, granted: set[str],
          core: tuple[str, ...] = (), relaunches: bool = False) -> Clearance:
    """Whether process pid may file role's report, the role's pane running pane_pid (None:
    no pane), the processes granted this round being granted; core: `cli_of`'s."""
    chain = processes.lineage(pid, 6) if pid > 0 else []
    evidence = " ← ".join(one.shown() for one in chain) or f"pid {pid} (gone)"
    if not chain:
        return Clearance("the kernel did not name the submitting process (or it is gone)",
                       evidence)
    if pane_pid is None:
        return Clearance(f"the {role} has no live process to file it", evidence)
    cli = cli_of(pane_pid, core, relaunches)
    if not cli or identity(pane_pid) not in granted:
        return Clearance(f"the {role}'s process is not the one handoff started for this round",
                       evidence)
    if _from_cli(chain, cli):
        return Clearance("", evidence)
    if any(one.pid == cli for one in chain) or _inside(chain, pane_pid):
        return Clearance(f"it ran under another program of the {role}'s session ({evidence}), "
                       "not as a command of the CLI itself: what the CLI runs (tests, "
                       "scripts, the code under review) cannot file its report", evidence)
    return Clearance(f"it did not run in the {role}'s own session ({evidence})", evidence)


def _from_cli(chain: list[Seen], cli: int) -> bool:
    """chain[0] was started by the CLI, directly or through shells alone (Gemini CLI runs a
    command in a shell that runs it in a subshell)."""
    for one in chain[1:]:
        if one.pid == cli:
            return True
        if one.program not in SHELLS:
            return False
    return False


def _inside(chain: list[Seen], pane_pid: int) -> bool:
    """The process descends from the role's pane (within the few ancestors read), or is an
    orphan of its sandbox: read further up."""
    if any(one.pid == pane_pid for one in chain):
        return True
    return any(one.pid == pane_pid for one in processes.lineage(chain[-1].pid, 32))

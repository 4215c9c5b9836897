"""The `handoff` command line: the typer app, its own options (--version, --verbose), its
commands in the order `handoff --help` lists them, and `main`. Each command lives with its
family (tickets.py: start, resume, answer, recycle, stop, close, submit; looking.py: status,
watch, log, attach; finishing.py: finish, conflicts; upkeep.py: init, doctor, providers, gc,
demo; elsewhere.py: the commands of hosts): it parses its options, calls the core (create, resume, closing,
standing, finish, gc, ...) and renders what it returns; what to do is decided in the core. A
command about one ticket that runs where the ticket runs is given elsewhere.OnItsHost here:
for a ticket on a host, the words typed go there, once, before the command runs.

Exit codes (defined in handoff/errors.py, listed in docs/cli.md): 0 ok (for a run: passed),
1 failed, 2 usage, 3 not found, 4 busy (another orchestrator), 5 refused to protect work,
6 missing tool, 10 the run ended with the ticket needing a person, 11 escalated, 70 internal
error (a crash log is written), 130 stopped by Ctrl-C or a signal.

Each command imports the modules it needs when it runs: `handoff --version`, `--help` and a
shell-completion request (one per TAB) load typer alone, not libtmux, yaml or GitPython.
Output is plain text (click's help, not rich's); NO_COLOR still holds for anything echoed.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from handoff.cli import (
    approving,
    elsewhere,
    finishing,
    looking,
    output,
    tickets,
    upkeep,
    verifying,
)
from handoff.cli.elsewhere import OnItsHost, on_its_host
from handoff.errors import EXIT_INTERRUPTED, EXIT_OK, HandoffError, describe

# rich_markup_mode=None: click's plain help and error formatting. typer's rich formatting
# imports rich and markdown-it, 67 ms on every --help and every mistyped option (measured):
# more than the whole `status` command.
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="Run AI coding CLIs as a small team: an implementer, testers and "
                       "reviewers side by side in tmux, git worktrees per role, a bounded review "
                       "loop.",
                  epilog="Exit codes: 0 ok (a run: passed), 1 failed, 2 usage, 3 not found, "
                         "4 busy, 5 refused to protect work, 6 missing tool, 10 needs-human, "
                         "11 escalated, 70 internal error (crash log), 130 interrupted "
                         "(docs/cli.md).")


def _print_version(value: bool) -> None:
    if value:
        from handoff.build import version

        typer.echo(f"handoff {version()}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    show_version: Annotated[bool, typer.Option(
        "--version", "-V", is_eager=True, callback=_print_version,
        help="Print handoff's version and exit.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log every subprocess (argv, exit status, ms) and every event, "
        "to stderr, or to the ticket's handoff.log while an orchestrator runs (also: "
        "HANDOFF_DEBUG=1).")] = False,
) -> None:
    # no docstring: the app's help above stays the help of `handoff --help`
    if verbose:
        from handoff import trace

        trace.enable()  # for the orchestrator this starts, too
        trace.to_stderr()


# the commands, in the order `handoff --help` lists them
app.command()(upkeep.init)
app.command(name="doctor")(upkeep.doctor_command)
app.command()(upkeep.providers)
app.command()(finishing.conflicts)
app.command()(tickets.start)
app.command()(approving.plan)
# --all names no one ticket; --foreground runs its orchestrator in this terminal
app.command(cls=on_its_host(here_with=("every", "foreground")))(tickets.resume)
app.command()(looking.status)
app.command()(looking.watch)
app.command(cls=on_its_host(terminal_with="follow"))(looking.log)
app.command(cls=OnItsHost)(looking.diff)
app.command(cls=on_its_host(terminal_with=elsewhere.ALWAYS))(looking.attach)
app.command(cls=OnItsHost)(tickets.recycle)
app.command()(tickets.submit)
app.command(cls=OnItsHost)(tickets.answer)
app.command(cls=OnItsHost)(tickets.stop)
app.command()(tickets.close)  # on a host: its work fetched here first (hosts.close_on)
app.command()(finishing.finish)
app.command()(verifying.verify)
app.command()(tickets.forget)
app.command(name="gc")(upkeep.gc_command)
app.command()(elsewhere.hosts)
app.command(name="host-info", hidden=True)(elsewhere.host_info)
app.command(name="host-report", hidden=True)(elsewhere.host_report)
app.command(name="host-forget", hidden=True)(elsewhere.host_forget)
app.command()(upkeep.demo)


@functools.cache
def command() -> Any:
    """The click command typer builds from `app`: built once a process (about 35 ms, which the
    warm process pays once for all its children, handoff.cli.warm), then reused (each run
    makes a context of its own)."""
    return typer.main.get_command(app)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line on argv (default: this process's arguments); its exit status."""
    from handoff import trace

    trace.to_stderr()  # HANDOFF_DEBUG=1 set by the person (--verbose sets it later)
    # click's default: escape codes only to a terminal; with NO_COLOR, none at all (click
    # strips them from everything echoed, whatever made them)
    color = False if output.plain() else None
    try:
        command()(args=None if argv is None else list(argv), prog_name="handoff", color=color)
    except SystemExit as done:  # how click ends every command, a successful one too
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except HandoffError as exc:
        typer.echo(describe(exc), err=True, color=color)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return 0

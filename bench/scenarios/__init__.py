"""The benchmark's scenarios, one module each; every module has `run(options) -> [Figure]`.

The table below is what `python -m bench --help` lists and the runner picks from; a module is
imported only when its scenario runs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    #: repetitions (pairs, tickets) for the scenario; None: the scenario's own default
    reps: int | None = None
    #: the interpreter running handoff's command line (None: each scenario's default)
    python: str | None = None
    #: seconds of each waiting orchestrator's measuring window (ticket)
    idle: float = 10.0
    #: tickets started at once (crowd)
    tickets: int = 20
    #: the crowd's max_parallel (None: as many as it has tickets, so none waits)
    max_parallel: int | None = None
    #: the crowd starts with a warm process running (handoff.cli.warm), not without one
    warm: bool = False

    def reps_or(self, default: int) -> int:
        return max(self.reps, 1) if self.reps is not None else default


@dataclass(frozen=True)
class Scenario:
    name: str
    summary: str
    #: run when no scenario is named
    default: bool = True
    #: runs handoff through options.python (so `--before` can measure an earlier commit);
    #: False: it measures this checkout in-process
    takes_python: bool = True

    @property
    def module(self) -> str:
        return f"bench.scenarios.{self.name}"


SCENARIOS = (
    Scenario("ops", "handoff's own operations (worktrees, tmux, launch, paste, deliver, watch, "
                    "files, status per ticket, the demo) against the raw git/tmux/file work",
             takes_python=False),
    Scenario("ticket", "a ticket's life through the CLI: start, the waiting orchestrator's CPU "
                       "and subprocesses, recycle, close, against raw git/tmux"),
    Scenario("floor", "the whole scripted demo ticket against a raw-floor script; hand-over "
                      "latency; post_create runs per worktree"),
    Scenario("startup", "CPU of `handoff submit`, `status`, `--help` against `python -c pass` "
                        "of the same interpreter (a runtime-only venv unless --python)"),
    Scenario("crowd", "20 tickets at once (--tickets N): start's return, all passed, hand-over "
                      "under load; takes minutes, run only when named", default=False),
    Scenario("review", "gate passed → the real Claude Code reviewer's prompt arrived, warmed "
                       "during the gate or started after it (the stand-in model, from a "
                       "checkout); takes minutes, run only when named", default=False),
)

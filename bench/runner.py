"""`python -m bench [SCENARIO...] [--reps N] [--markdown]`: run the named scenarios (all but
crowd by default) and print every figure with its target and verdict.

Nothing here asserts a timing: a missed target is a verdict in the table, not a failure. The
exit status is 0 when every scenario ran, 1 when one could not (its error is printed and the
others still run), 2 for a usage error."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from types import FrameType

from bench import before, machine
from bench.figures import Figure, render_markdown, render_text
from bench.runtime_venv import runtime_python
from bench.sandbox import BenchError
from bench.scenarios import SCENARIOS, Options, Scenario


def _terminate(signum: int, frame: FrameType | None) -> None:
    """SIGTERM/SIGHUP end the run like an error, so every sandbox cleans up."""
    raise SystemExit(128 + signum)


def parser() -> argparse.ArgumentParser:
    listed = "\n".join(f"  {s.name:<8} {s.summary}" for s in SCENARIOS)
    made = argparse.ArgumentParser(
        prog="python -m bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="handoff against the raw git, tmux and Python work it stands on: for each "
                    "figure handoff's and its baseline's min / median / max, their ratio, the "
                    "target and the verdict (met, missed, info).",
        epilog=f"scenarios (default: all but crowd):\n{listed}")
    made.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                      help="scenarios to run, by name (default: all but crowd)")
    made.add_argument("--reps", type=int, default=None,
                      help="repetitions per scenario (default: each scenario's own)")
    made.add_argument("--markdown", action="store_true",
                      help="print a markdown table headed by the machine (for docs/performance.md)")
    made.add_argument("--python", default=None, metavar="PATH",
                      help="the interpreter running handoff's command line (default: a cached "
                           "runtime-only venv for startup, this interpreter for the others)")
    made.add_argument("--before", default=None, metavar="COMMIT",
                      help="run each scenario against handoff at COMMIT too (installed from "
                           "this checkout's history into a cached venv) and against this "
                           "checkout installed the same way, twice each (before, after, after, "
                           "before), and show each figure before and after (ops measures this "
                           "checkout in-process: after only)")
    made.add_argument("--idle", type=float, default=Options.idle, metavar="SECONDS",
                      help="each waiting-orchestrator window in ticket (default %(default)g)")
    made.add_argument("--tickets", type=int, default=Options.tickets, metavar="N",
                      help="tickets started at once in crowd (default %(default)d)")
    made.add_argument("--warm", action="store_true",
                      help="the crowd's starts find a warm process running (as after any "
                           "handoff command of the last 15 minutes); without it the first "
                           "start starts one")
    made.add_argument("--max-parallel", type=int, default=None, metavar="N",
                      help="the crowd's max_parallel (default: its ticket count, none waits); "
                           "below it, the most tickets seen with live peers is a figure")
    return made


def chosen(names: Sequence[str]) -> list[Scenario] | str:
    """The scenarios named (in the table's order), or what is wrong with the names."""
    known = {s.name: s for s in SCENARIOS}
    unknown = [n for n in names if n not in known]
    if unknown:
        return (f"unknown scenario {', '.join(unknown)}; choose from "
                f"{', '.join(known)}")
    return [s for s in SCENARIOS if s.name in names] if names else \
        [s for s in SCENARIOS if s.default]


def run_scenario(scenario: Scenario, options: Options) -> list[Figure]:
    """Its figures; a scenario that could not run gives one figure saying why (missed)."""
    module = importlib.import_module(scenario.module)
    try:
        figures: list[Figure] = module.run(options)
    except (BenchError, OSError) as exc:
        print(f"bench: {scenario.name} failed: {exc}", file=sys.stderr, flush=True)
        return [Figure(f"{scenario.name}: could not run", "", [], error=str(exc)[:400])]
    return figures


def _sides(commit: str, python: str | None) -> tuple[before.Side, before.Side]:
    """handoff at commit, and this checkout: both installed as a person installs them (unless
    --python names the after side's interpreter)."""
    print(f"bench: installing handoff at {commit} (once per commit) …", file=sys.stderr,
          flush=True)
    earlier = before.before_side(commit)
    return earlier, before.Side(python or str(runtime_python()), machine.commit())


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    scenarios = chosen(args.scenarios)
    if isinstance(scenarios, str):
        print(f"bench: {scenarios}", file=sys.stderr)
        return 2
    for tool in ("git", "tmux"):
        if shutil.which(tool) is None:
            print(f"bench: {tool} is not installed", file=sys.stderr)
            return 2
    # absolute but not resolved: a venv's python is a symlink out of the venv
    python = os.path.abspath(args.python) if args.python else None
    options = Options(reps=args.reps, python=python, idle=args.idle, tickets=args.tickets,
                      max_parallel=args.max_parallel, warm=args.warm)
    previous = {s: signal.signal(s, _terminate) for s in (signal.SIGTERM, signal.SIGHUP)}
    started = time.perf_counter()
    figures: list[Figure] = []
    earlier: list[Figure] = []
    sides: tuple[before.Side, before.Side] | None = None
    try:
        if args.before:
            sides = _sides(args.before, python)
            options = replace(options, python=sides[1].python)
        for scenario in scenarios:
            if sides is None or not scenario.takes_python:
                print(f"bench: {scenario.name} …", file=sys.stderr, flush=True)
                figures += run_scenario(scenario, options)
                continue
            # before, after, after, before: a machine whose speed drifts during the run
            # weighs on both sides alike
            runs: dict[int, list[list[Figure]]] = {0: [], 1: []}
            for side in (0, 1, 1, 0):
                print(f"bench: {scenario.name} {('before', 'after')[side]} "
                      f"({sides[side].commit}) …", file=sys.stderr, flush=True)
                runs[side].append(run_scenario(scenario, replace(
                    options, python=sides[side].python)))
            earlier += before.merged(runs[0])
            figures += before.merged(runs[1])
    except BenchError as exc:  # the earlier commit could not be installed
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    took = time.perf_counter() - started
    names = " ".join(s.name for s in scenarios)
    if sides is not None:
        print(before.render_compared(earlier, figures, sides, args.markdown) + "\n")
        figures = [*figures, *(f for f in earlier if f.error)]
    if args.markdown:
        title = (f"`python -m bench {names}` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, "
                 f"{took:.0f} s")
        print(render_markdown(figures, machine.describe(), title))
    else:
        print(f"handoff bench: {names}; {took:.0f} s; ratio = median / median\n")
        print(render_text(figures))
        print("\n" + "; ".join(machine.describe()))
    return 1 if any(f.error for f in figures) else 0

"""The config's scanners, run by the gate after the plan's test command: a secret scanner, a
linter, a security check, scoped to what the ticket changed.

Each runs as the gate's command does (handoff.loop.gate.run_gate: its own process group, the
gate's timeout and output cap, the same checkout, environment and sandbox), one after another,
every one even after one failed, so a round sent back names everything at once. A list
placeholder with nothing in it skips its scanner (nothing for it to scan); a program that is
not installed runs nothing: a required one stops the gate for a person (no implementer round
can install it), an optional one is only said.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TypedDict

from handoff.config import LIST_PLACEHOLDERS, Scanner
from handoff.loop.gate import excerpt, run_gate


@dataclass(frozen=True)
class Scope:
    """What the placeholders stand for at one gate run."""

    base: str
    commit: str
    #: the paths changed base...commit that exist at commit, repository-relative
    changed: tuple[str, ...]


class ScanState(StrEnum):
    """How one scanner's run at a gate ended."""

    PASSED = "passed"
    FAILED = "failed"
    #: no changed file of its kind to scan
    SKIPPED = "skipped"
    #: not installed where the gate runs
    MISSING = "missing"


class ScanFields(TypedDict):
    """The fields of a `scanner` event."""

    name: str
    required: bool
    state: ScanState
    summary: str
    #: its log's name in the ticket folder ('' when nothing ran)
    log: str


@dataclass(frozen=True)
class ScanResult:
    name: str
    required: bool
    state: ScanState
    argv: tuple[str, ...]
    #: one line a person reads
    summary: str
    #: its log's path ('' when nothing ran)
    log: str = ""
    output: str = ""

    @property
    def blocks(self) -> bool:
        """It sends the round back: a required scanner that failed."""
        return self.required and self.state == ScanState.FAILED

    def fields(self) -> ScanFields:
        """For a `scanner` event."""
        return {"name": self.name, "required": self.required, "state": self.state,
                "summary": self.summary, "log": Path(self.log).name if self.log else ""}


def expand(command: Sequence[str], scope: Scope) -> list[str] | None:
    """The argv with its placeholders filled: a list one becomes one argument per path (a path
    that starts with '-' is written ./-x, never read as an option), `{diff_range}` is
    `base..commit` (the commits on the branch since the base, as `git log` and gitleaks's
    --log-opts take it), `{base}` and `{commit}` the full hashes. None when a list placeholder
    has no path to give: the scanner is skipped."""
    lists = {"{changed_files}": list(scope.changed),
             "{changed_py_files}": [p for p in scope.changed if p.endswith((".py", ".pyi"))]}
    text = {"{diff_range}": f"{scope.base}..{scope.commit}", "{base}": scope.base,
            "{commit}": scope.commit}
    argv: list[str] = []
    for arg in command:
        if arg in LIST_PLACEHOLDERS:
            paths = lists[arg]
            if not paths:
                return None
            argv += [f"./{p}" if p.startswith("-") else p for p in paths]
            continue
        for placeholder, value in text.items():
            arg = arg.replace(placeholder, value)
        argv.append(arg)
    return argv


def installed(program: str, env: Mapping[str, str], cwd: Path) -> str | None:
    """Where program runs from on the gate's PATH (a path with a '/' from the checkout);
    None when it is not there."""
    if "/" in program:
        path = Path(program) if Path(program).is_absolute() else cwd / program
        return str(path) if path.is_file() and os.access(path, os.X_OK) else None
    return shutil.which(program, path=env.get("PATH", ""))


def run_scanners(scanners: Sequence[Scanner], scope: Scope, cwd: Path, env: dict[str, str],
                 timeout: float, log_of: Callable[[str], Path], record: Path | None = None,
                 fence: Callable[[Sequence[str]], list[str]] | None = None,
                 nice: int = 0) -> list[ScanResult]:
    """Every scanner, in order, each bounded as the gate's command is."""
    found = []
    for scanner in scanners:
        argv = expand(scanner.command, scope)
        if argv is None:
            found.append(ScanResult(scanner.name, scanner.required, ScanState.SKIPPED, (),
                                    "skipped: no changed file of its kind to scan"))
            continue
        if installed(argv[0], env, cwd) is None:
            found.append(ScanResult(scanner.name, scanner.required, ScanState.MISSING, tuple(argv),
                                    f"not installed: {argv[0]} is not on the gate's PATH"))
            continue
        log = log_of(scanner.name)
        result = run_gate(argv, cwd, env, timeout, log, record=record, fence=fence, nice=nice)
        found.append(ScanResult(scanner.name, scanner.required,
                                ScanState.PASSED if result.passed else ScanState.FAILED, tuple(argv),
                                result.summary(), str(log), result.output))
    return found


def fix_for_missing(scanner: Scanner, env: Mapping[str, str], ticket: str,
                    file: str = ".handoff.yaml") -> str:
    """How to mend a required scanner that is not installed (file: where it is configured)."""
    folders = [p for p in env.get("PATH", "").split(os.pathsep) if p][:4]
    return (f"Install {scanner.command[0]} where the gate finds it (its PATH: "
            f"{os.pathsep.join(folders)}…), or set required: false for scanner {scanner.name} "
            f"in {file}; then 'handoff answer {ticket} go' runs the gate again.")


def note(results: Sequence[ScanResult]) -> tuple[str, str] | None:
    """What the implementer's next round is told of the scanners that block: each one's
    summary, its log and the end of its output (bytes, not lines, are bounded)."""
    blocking = [r for r in results if r.blocks]
    if not blocking:
        return None
    parts = [f"- `{r.name}`: {r.summary}; its log is `{r.log}`. Its end:\n\n```\n"
             f"{excerpt(r.output)}\n```\n" for r in blocking]
    return ("The scanners failed", "\n".join(parts))

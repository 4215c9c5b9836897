"""Every subprocess handoff runs goes through here (argv only, never a shell, always a
timeout), with these exceptions, each for its reason:

* git, through GitPython with the same guarantees (handoff.machinery.gitcmd);
* the gate's test commands (handoff.loop.gate: their output is kept as it streams, to a bound);
* what must work when this may not: the crash report's version probes (handoff.cli.crash), the
  providers' `--version`/`--help` probes (bounded there, run before any config exists);
* the board's `attach` (a terminal handed to tmux), the demo's repository setup, and the
  scripted agent, which is a peer program, not handoff.

Three things hold for every child:

* it runs in a session (and so a process group) of its own: on a timeout the whole group is
  ended, TERM then KILL, so what a hung command started does not outlive the call;
* its stdin is /dev/null unless input is given: nothing handoff runs may wait on a terminal;
* it never sees a variable that points git at another repository (`scrubbed`).
"""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from handoff import trace
from handoff.errors import ExternalFailure, MissingTool, NotFound, UsageError
from handoff.machinery import groups

DEFAULT_TIMEOUT = 30.0
#: how long a process group gets between TERM and KILL, and how long a KILLed one gets to go
KILL_GRACE = 2.0

#: seconds one git call may take unless HANDOFF_GIT_TIMEOUT says otherwise: room for a cold
#: checkout of a big repo and its hooks, and a bound on a hook that hangs
GIT_TIMEOUT = 60.0
TIMEOUT_VARIABLE = "HANDOFF_GIT_TIMEOUT"


def git_timeout() -> float:
    return seconds_from(TIMEOUT_VARIABLE, GIT_TIMEOUT)


def seconds_from(variable: str, default: float, most: float = 86400.0) -> float:
    """A bound a person may set in the environment (read at each call, not at import: a
    command the warm process relays has its own environment): default when unset."""
    raw = os.environ.get(variable, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= most):
        raise UsageError(f"{variable}={raw[:40]!r} is not a number of seconds up to {most:g}",
                         f"set it to a positive number (e.g. {variable}={2 * default:g}) or "
                         f"unset it for the default {default:g}")
    return value


#: Variables that say which repository, index, object store or refs git works on: git's own
#: list (`git rev-parse --local-env-vars`, what git clears before it works in another
#: repository) without its config entries, plus GIT_NAMESPACE. Inherited from a hook, an
#: alias or a user's shell they would send handoff's git calls, and the peers', into another
#: repository. What stays says how this user wants git to behave wherever it runs: identity
#: (GIT_AUTHOR_*, GIT_COMMITTER_*), config (GIT_CONFIG_GLOBAL, GIT_CONFIG_NOSYSTEM,
#: GIT_CONFIG_COUNT/KEY/VALUE), transport (GIT_SSH_COMMAND) and discovery limits
#: (GIT_CEILING_DIRECTORIES, which can only stop git finding a repository, never redirect it).
REPO_LOCATING = frozenset({
    "GIT_DIR", "GIT_WORK_TREE", "GIT_IMPLICIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE", "GIT_GRAFT_FILE", "GIT_REPLACE_REF_BASE",
    "GIT_NO_REPLACE_OBJECTS",
})


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """env without the variables that would point git at another repository."""
    return {name: value for name, value in env.items() if name not in REPO_LOCATING}


def run(
    argv: Sequence[str],
    *,
    cwd: Path | str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input_text: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run argv and return its result; raise a HandoffError a person can read on failure.

    env (default: this process's environment) is always `scrubbed`.
    """
    started = time.monotonic()
    child = _start(argv, cwd, scrubbed(os.environ if env is None else env), input_text)
    try:
        stdout, stderr = child.communicate(input_text, timeout=timeout)
    except subprocess.TimeoutExpired:
        finished = child.poll() is not None  # only something it started still holds our pipes
        end_child(child)
        stdout, stderr = _leftover_output(child)
        trace.command(argv, child.returncode if finished else None, started)
        if not finished:
            raise ExternalFailure(
                f"{' '.join(argv[:3])} … did not finish within {timeout:g}s; it was stopped "
                "together with every process it started",
                "something it waits on hangs (for tmux: a stopped server; for a post_create "
                "command: what it waits on); mend that and retry",
            ) from None
    except BaseException:  # stopped or interrupted while it ran: it must not outlive us either
        end_child(child)
        raise
    else:
        trace.command(argv, child.returncode, started)
    result = subprocess.CompletedProcess(list(argv), child.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise ExternalFailure(f"{' '.join(argv[:4])} failed: "
                              f"{failure_said(result.stderr, result.stdout, result.returncode)}")
    return result


#: how much of a failed command's output its error keeps: its whole message as a rule (git's
#: cause is often not its last line: "No space left on device" comes before "fatal: ..."),
#: the end of a flood
SAID_LIMIT = 1500


def failure_said(stderr: str, stdout: str, status: int) -> str:
    """What a failed command said, on one line: its stderr (else its stdout), every line of
    it, the end kept when it is long; its exit status when it said nothing."""
    lines = [line.strip() for line in (stderr.strip() or stdout.strip()).splitlines()
             if line.strip()]
    if not lines:
        return f"exit {status}"
    said = "; ".join(lines)
    return said if len(said) <= SAID_LIMIT else "… " + said[-SAID_LIMIT:]


def _start(argv: Sequence[str], cwd: Path | str | None, env: dict[str, str],
           input_text: str | None) -> subprocess.Popen[str]:
    try:
        return subprocess.Popen(
            list(argv), cwd=cwd, env=env,
            stdin=subprocess.DEVNULL if input_text is None else subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
            start_new_session=True,
        )
    except FileNotFoundError:
        if cwd is not None and not Path(cwd).is_dir():
            raise NotFound(f"the folder {cwd} does not exist (needed to run {argv[0]})") from None
        raise MissingTool(
            f"{argv[0]} is not installed or not on PATH",
            f"install {os.path.basename(argv[0])} and try again",
        ) from None
    except PermissionError:
        raise MissingTool(f"{argv[0]} cannot be run (permission denied)",
                          f"make it executable: chmod +x {argv[0]}") from None


def end_child(child: subprocess.Popen[str], grace: float = KILL_GRACE) -> None:
    """End child's whole process group, then reap child.

    The group id is the child's pid (it leads its own session); until the child is reaped the
    kernel hands that number to no other process or group, so it names only ours.
    """
    try:
        groups.end_group(child.pid, grace)
    finally:
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(timeout=grace)


def _leftover_output(child: subprocess.Popen[str]) -> tuple[str, str]:
    """What a finished child wrote, once the processes it left holding its pipes are gone; a
    pipe someone outside its group still holds (a daemon that left the group) is given up."""
    try:
        stdout, stderr = child.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()
        return "", ""
    return stdout or "", stderr or ""

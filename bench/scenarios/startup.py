"""The CPU a short handoff command costs against `python -c pass` of the same interpreter:
`handoff submit` (which peers run for every report), `handoff status` and `handoff --help`.

CPU is user + system time of the child process (and any it waited for), from
resource.getrusage(RUSAGE_CHILDREN) before and after each run; handoff's command and the
baseline alternate. The interpreter is, unless --python names another, a cached venv with
handoff installed from this checkout with its runtime dependencies only (bench.runtime_venv),
as a person installs it: the test extras' packages would not be imported, but their .pth files and a
longer sys.path cost every start.

* submit: `python -m handoff submit REPORT --dir D --role implementer` to a real ticket
  directory whose state (reviewing) refuses the implementer's report: the lean path
  (handoff.cli.filing) reads the report and the state and answers, as it does for every report;
* status: `python -m handoff status` with STATUS_TICKETS tickets on disk;
* --help: `python -m handoff --help`.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from bench.figures import Figure, Target
from bench.runtime_venv import runtime_python
from bench.sandbox import BenchError, Sandbox
from bench.scenarios import Options
from handoff.phases import Phase
from handoff.record.ticket import State, ticket_dir

DEFAULT_REPS = 20
STATUS_TICKETS = 5
#: CPU against `python -c pass` of the same venv: a peer runs `submit` for every report and
#: scripts run `status` in prompts, so these start often
TARGETS = {"submit": 3.0, "status": 6.0, "--help": 8.0}
KEY = "repo-0123456789"


def child_cpu_ms(argv: list[str], box: Sandbox) -> tuple[float, subprocess.CompletedProcess[str]]:
    """(user + system ms of the child, what it did)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(argv, cwd=box.root / "work", env=box.env, capture_output=True,
                          text=True, timeout=120, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    spent = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return spent * 1000, done


def make_tickets(box: Sandbox) -> tuple[Path, Path]:
    """STATUS_TICKETS ticket directories (the first one reviewing); (its folder, a report)."""
    for n in range(STATUS_TICKETS):
        tdir = ticket_dir(box.home, KEY, f"S-{n}")
        tdir.path.mkdir(parents=True)
        tdir.save(State(ticket=f"S-{n}", repo=str(box.root / "repo"), repo_key=KEY,
                        phase=Phase.REVIEWING, round=1, commits={"1": "a" * 40},
                        worktrees={"implementer": "/x/implementer", "reviewer": "/x/reviewer"}))
        for kind in ("orchestrator", "phase", "submission", "phase"):
            tdir.events.append(kind, round=1, role="implementer")
    report = box.root / "work" / "report.md"
    report.write_text("---\nrole: implementer\nround: 1\nstatus: done\n---\n# Done\n",
                      encoding="utf-8")
    return ticket_dir(box.home, KEY, "S-0").path, report


def expect(name: str, done: subprocess.CompletedProcess[str], code: int, text: str) -> None:
    """A run that did something else than the figure means is no measurement of it."""
    said = done.stdout + done.stderr
    if done.returncode != code or text not in said:
        raise BenchError(f"handoff {name} exited {done.returncode} without {text!r}: "
                         f"{said.strip()[-400:]}")


def run(options: Options) -> list[Figure]:
    reps = options.reps_or(DEFAULT_REPS)
    python = options.python or str(runtime_python())
    version = subprocess.run([python, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True, timeout=60,
                             check=False).stdout.strip()
    print(f"bench: startup: interpreter {python} (Python {version})", file=sys.stderr,
          flush=True)
    with Sandbox("startup", python) as box:
        folder, report = make_tickets(box)
        handoff = [python, "-m", "handoff"]
        commands = {
            "submit": ([*handoff, "submit", str(report), "--dir", str(folder), "--role",
                        "implementer"], 1, "not waiting for the implementer"),
            "status": ([*handoff, "status"], 0, f"S-{STATUS_TICKETS - 1}"),
            "--help": ([*handoff, "--help"], 0, "Usage"),
        }
        baseline = [python, "-c", "pass"]
        ours: dict[str, list[float]] = {name: [] for name in commands}
        theirs: dict[str, list[float]] = {name: [] for name in commands}
        child_cpu_ms(baseline, box)  # untimed: the first run pays the page cache
        for i in range(reps):
            for name, (argv, code, text) in commands.items():
                for side in (("ours", "base") if i % 2 == 0 else ("base", "ours")):
                    if side == "base":
                        theirs[name].append(child_cpu_ms(baseline, box)[0])
                        continue
                    spent, done = child_cpu_ms(argv, box)
                    expect(name, done, code, text)
                    ours[name].append(spent)
    where = f"interpreter {python} (Python {version})"
    notes = {"submit": f"the lean path, refused by the ticket's state; {where}",
             "status": f"{STATUS_TICKETS} tickets on disk; {where}", "--help": where}
    return [Figure(f"CPU of handoff {name}", "ms", ours[name], theirs[name],
                   "python -c pass, same interpreter",
                   targets=(Target("ratio", at_most=TARGETS[name]),), note=notes[name])
            for name in commands]

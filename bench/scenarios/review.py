"""A review round's hand-over with the real Claude Code as the reviewer: the time from the
gate's pass to the reviewer's prompt arriving (its UserPromptSubmit hook, as the orchestrator
records it), with the reviewer warmed while the gate ran and, paired with it, started on its
brief after the gate (`warm_reviewers: false`). In the warm runs the CLI's own part, from the
brief's paste to its prompt hook, is measured too: the target is what handoff adds on top of it.

The model is the test suite's stand-in Anthropic server (tests/standins, on 127.0.0.1), and the
CLI its pinned Claude Code (`python -m tests.standins.install`): run from a checkout, on
demand; it takes a minute a pair.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from bench.figures import Figure, Target
from bench.sandbox import BenchError, Sandbox
from bench.scenarios import Options
from handoff.operations import demo

DEFAULT_REPS = 3
#: seconds the gate's test command takes: a project's suite takes a while, and the demo's own
#: test (about 0.1 s) is shorter than Claude Code's start-up, which the gate is there to hide
GATE_SECONDS = 2.0
#: ms handoff may add to the CLI's own prompt-to-working time with a warmed reviewer
BEYOND_CLI = 300.0


def stamps(events: Path) -> list[dict[str, object]]:
    rows = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines() if line]
    for row in rows:
        row["ms"] = datetime.fromisoformat(str(row["time"])).timestamp() * 1000
    return rows


def hand_over(events: Path) -> list[tuple[float, float | None]]:
    """Per reviewed round: (gate passed → the reviewer's prompt arrived, brief pasted → the
    prompt arrived; None when it was started on its brief, not pasted), in ms. The prompt
    arrived when handoff first judged the reviewer at work: its UserPromptSubmit hook or its
    busy screen, whichever it read first."""
    rows = stamps(events)
    out: list[tuple[float, float | None]] = []
    for row in rows:
        if row.get("kind") != "gate" or row.get("result") != "pass":
            continue
        n = row.get("round")
        later = [r for r in rows if r.get("round") == n and r.get("role") == "reviewer"
                 and float(str(r["ms"])) >= float(str(row["ms"]))]
        arrived = next((r for r in later if r.get("kind") == "peer"
                        and r.get("state") == "working"), None)
        pasted = next((r for r in later if r.get("kind") == "brief"), None)
        if arrived is None:
            continue
        gate_ms, arrived_ms = float(str(row["ms"])), float(str(arrived["ms"]))
        out.append((arrived_ms - gate_ms,
                    arrived_ms - float(str(pasted["ms"])) if pasted is not None else None))
    return out


def ticket(box: Sandbox, claude: Path, n: int, warm: bool) -> Path:
    """One two-round demo ticket with the scripted implementer and Claude Code reviewing."""
    from tests.standins.homes import claude_home

    repo = demo.make_repo(box.root / f"r{n}-{'warm' if warm else 'cold'}")
    claude_home(Path(box.env["HOME"]), [repo])
    box.home.mkdir(parents=True, exist_ok=True)
    (box.home / "config.yaml").write_text(json.dumps({  # JSON is YAML
        "roles": {"implementer": {"provider": "scripted"},
                  "reviewer": {"provider": "claude", "binary": str(claude)}},
        "warm_reviewers": warm}) + "\n", encoding="utf-8")
    plan = box.root / "plan.md"
    text = demo.plan_text(box.python)
    gate = text.split("test: ", 1)[1].split("\n", 1)[0]
    held = [box.python, "-c", "import shlex, subprocess, sys, time\n"
            f"time.sleep({GATE_SECONDS})\n"
            "sys.exit(subprocess.call(shlex.split(sys.argv[1])))", gate]
    # a JSON list is a YAML flow list: the argv as it is, its newlines kept
    plan.write_text(text.replace(f"test: {gate}\n", f"test: {json.dumps(held)}\n"),
                    encoding="utf-8")
    name = f"R-{n}-{'w' if warm else 'c'}"
    box.handoff("start", name, "--plan", str(plan), "--yes", "--foreground", cwd=repo)
    found = list(box.home.glob(f"*/{name}/events.jsonl"))
    if not found:
        raise BenchError(f"{name} left no event log")
    return found[0]


def run(options: Options) -> list[Figure]:
    try:
        from tests.standins import install
        from tests.standins.anthropic import AnthropicStandIn
        from tests.standins.homes import CLAUDE_TOKEN
    except ImportError as exc:
        raise BenchError(f"the review scenario runs from a checkout with tests/: {exc}") from None
    reps = options.reps_or(DEFAULT_REPS)
    warm_total: list[float] = []
    cold_total: list[float] = []
    cli_own: list[float] = []
    beyond: list[float] = []
    with AnthropicStandIn() as api, Sandbox("review", options.python) as box:
        claude = install.binary("claude")
        box.env.update({"ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_AUTH_TOKEN": CLAUDE_TOKEN,
                        "IS_SANDBOX": "1"})
        for n in range(reps):
            print(f"bench: review: pair {n + 1}/{reps} …", file=sys.stderr, flush=True)
            for warm in ((True, False) if n % 2 == 0 else (False, True)):
                for total, own in hand_over(ticket(box, claude, n, warm)):
                    (warm_total if warm else cold_total).append(total)
                    if warm and own is not None:
                        cli_own.append(own)
                        beyond.append(total - own)
    return [
        Figure("gate passed → reviewer's prompt arrived, warm", "ms", warm_total, cold_total,
               "the reviewer started on its brief after the gate (warm_reviewers: false)",
               note="real Claude Code against the stand-in; events.jsonl `gate` pass → the "
                    "reviewer first judged at work (its prompt hook or its busy screen)"),
        Figure("the CLI's own: brief pasted → prompt arrived", "ms", cli_own,
               note="events.jsonl `brief` (paste) → the reviewer first judged at work"),
        Figure("handoff's part beyond the CLI's own, warm", "ms", beyond,
               targets=(Target("p50", at_most=BEYOND_CLI),),
               note="gate passed → brief pasted: the new tests at the base, the brief written, "
                    "the CLI at its input line, the paste; the gate takes "
                    f"{GATE_SECONDS:g} s more than the demo's own test"),
    ]

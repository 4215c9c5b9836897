"""handoff.machinery.ports: TCP ports for worktrees, never the same for two live ones."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from handoff.machinery.ports import PortBook
from tests.conftest import git
from tests.harness import (
    events,
    handoff,
    plan_text,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_phase,
    write_plan,
)

LOW, HIGH = 24100, 24299  # room for the 20 tickets × 3 worktrees × 2 ports one test books


def test_twenty_takers_at_once_never_share_a_port(tmp_path: Path) -> None:
    """Twenty processes book at the same moment, as twenty tickets starting together do."""
    script = textwrap.dedent(f"""
        import json, sys
        from pathlib import Path
        from handoff.machinery.ports import PortBook
        ports = PortBook(Path(sys.argv[1])).take(sys.argv[2], 2, {LOW}, {HIGH}, lambda o: True)
        print(json.dumps(ports))
    """)
    takers = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), f"T-{i}#gate"],
                               stdout=subprocess.PIPE, text=True) for i in range(20)]
    found = []
    for taker in takers:
        out, _ = taker.communicate(timeout=60)
        assert taker.returncode == 0
        found += json.loads(out)
    assert len(found) == 40 and len(set(found)) == 40
    assert sorted(int(p) for p in json.loads((tmp_path / "ports.json").read_text())) == \
        sorted(found)


BIND = ("import os, socket\n"
        "ports = [int(os.environ[f'HANDOFF_PORT_{i}']) for i in (1, 2)]\n"
        "assert int(os.environ['PORT']) == ports[0]\n"
        "for port in ports:\n"
        "    s = socket.socket(); s.bind(('127.0.0.1', port)); s.listen(); s.close()\n"
        "print('bound', *ports)\n")


def test_tickets_started_together_get_distinct_ports_that_their_gates_bind(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text(yaml.safe_dump(
        {"ports": 2, "port_range": f"{LOW}-{HIGH}", "max_parallel": 20,
         "post_create": [[sys.executable, "-c", "import os; open('.port', 'w').write("
                                                "os.environ['PORT'])"]]}))
    (repo / ".gitignore").write_text("__pycache__/\n.port\n")
    git(repo, "commit", "-qam", "the set-up's port file is ignored")
    plan = write_plan(tmp_path, plan_text(
        {1: {"edits": [{"file": "NOTES.md", "content": "x\n"}]}},
        test=[sys.executable, "-c", BIND]))
    tickets = [f"P-{i}" for i in range(20)]
    runs = [spawn("start", t, "--plan", str(plan), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / f"{t}.log") for t in tickets]
    try:
        for ticket in tickets:
            final = wait_phase(handoff_home, ticket, "passed", "escalated", "needs-human",
                               timeout=120)
            assert final["phase"] == "passed", final["reason"]
    finally:
        for run in runs:
            stop_runner(run)
    booked = {t: state(handoff_home, t)["ports"] for t in tickets}
    every = [p for ports in booked.values() for worktree in ports.values() for p in worktree]
    assert len(every) == 20 * 3 * 2 and len(set(every)) == len(every), "none given twice"
    gates = [p for ports in booked.values() for p in ports["gate"]]
    assert len(set(gates)) == 40
    for ticket in tickets:
        gate = booked[ticket]["gate"]
        log = (ticket_path(handoff_home, ticket) / "gate-1.log").read_text()
        assert f"bound {gate[0]} {gate[1]}" in log, "the gate bound its own two ports"
        # the set-up saw its worktree's ports too
        implementer = repo / ".worktrees" / ticket / "implementer"
        assert (implementer / ".port").read_text() == str(booked[ticket]["implementer"][0])
    closed = handoff("close", tickets[0], cwd=repo)
    assert closed.returncode == 0, closed.stderr
    given_back = next(e for e in events(handoff_home, tickets[0]) if e["kind"] == "phase"
                      and e["to"] == "closed")["ports"]
    assert sorted(given_back) == sorted(p for w in booked[tickets[0]].values() for p in w)
    assert not PortBook(handoff_home).held(str(ticket_path(handoff_home, tickets[0])) + "#")

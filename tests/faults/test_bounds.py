"""Bounds, attacked (issue 32, "No bounds"): a peer or the gate's command forks without end,
eats memory, or fills the sandbox's /tmp, in a real ticket with the sandbox on and small limits
(sandbox.limits: 64 processes, 256 MiB, /tmp 8 MiB). Each is held to its limit, said where a
person reads it, and the ticket goes on or ends with a clear event.

The bombs end by themselves (511 shells at most, tests/faults/attacker.py BOMB) and the hogs
stop at 2 GiB, so a limit that fails costs this machine no more than that; handoff's limits
on this machine are cgroup v1, checked by tests/unit/machinery/test_limit_mechanism.py before any bomb
here runs unchecked."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from handoff.machinery import limit_mechanism, limits
from tests.faults.attacker import BOMB_THROUGH
from tests.faults.catalog import fault
from tests.faults.test_sandbox import ATTACKER, attacker, started_with
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)

LIMITS = {"processes": 64, "memory": "256MiB", "tmp": "8MiB"}


@pytest.fixture(autouse=True)
def held_here() -> None:
    """Every case below trusts the cgroups of this machine (CI's image: root, cgroup v1)."""
    found = limit_mechanism.mechanism()
    assert found.holder(limit_mechanism.PIDS) and found.holder(limit_mechanism.MEMORY), found


def configure(home: Path, roles: dict[str, Any] | None = None, **more: Any) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump(
        {"sandbox": {"mode": "on", "limits": LIMITS}, **({"roles": roles} if roles else {}),
         **more}), encoding="utf-8")


def peer_attacks(repo: Path, tmp_path: Path, home: Path, attack: str,
                 role: str = "implementer") -> tuple[dict[str, Any], dict[str, Any]]:
    """A ticket whose role is the attacker: what the attack found, and how the ticket ended."""
    configure(home, {role: attacker(attack)})
    ticket = f"BND-{attack}"
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    final = wait_phase(home, ticket, "passed", "escalated", "needs-human", timeout=120)
    found = ticket_path(home, ticket) / "drafts" / role / f"attack-{attack}.json"
    assert found.is_file(), f"the attacker never ran: {final['reason']}"
    return json.loads(found.read_text()), final


def gate_attacks(repo: Path, tmp_path: Path, home: Path, attack: str) -> dict[str, Any]:
    """A ticket whose gate command is the attack (the implementer is honest): its end."""
    configure(home, max_gate_bounces=1)
    ticket = f"BNDG-{attack}"
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=[sys.executable, str(ATTACKER), "gate",
                                                      attack])
    done = handoff("start", ticket, "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=180)
    assert "sandbox: bubblewrap" in done.stdout, done.stdout + done.stderr
    return state(home, ticket)


def launched_with(home: Path, ticket: str) -> list[str]:
    return [e["limits"] for e in events(home, ticket) if e["kind"] == "launch"]


@fault("32", "a peer runs a fork bomb (each shell forks two more, 511 in all if nothing stops "
       "them)",
       "held to sandbox.limits.processes by the peer's own cgroup (joined by the launcher before "
       "the CLI starts: every descendant is in it); forks past the limit are refused, the bomb "
       "ends, the peer does its job and the ticket passes; each `launch` event names the limits "
       "and how this machine holds them",
       "the machine's processes, the ticket")
def test_a_peer_s_fork_bomb_is_held_to_the_process_limit(repo: Path, tmp_path: Path,
                                                         handoff_home: Path) -> None:
    found, final = peer_attacks(repo, tmp_path, handoff_home, "fork-bomb")
    assert found["got_through"] is False, found
    most = int(found["detail"].split()[0])
    assert 0 < most <= 64 < BOMB_THROUGH, found
    assert final["phase"] == "passed", final
    said = launched_with(handoff_home, "BND-fork-bomb")
    assert said and all(s.startswith("cgroup v1 (pids, memory): 64 processes, 256 MiB of "
                                      "memory, /tmp 8 MiB") for s in said), said
    made = [d for _, data in limits.recorded(handoff_home) for d in limits.dirs_of(data)]
    assert made and all(d.parent.name == "handoff" for d in made)
    assert handoff("close", "BND-fork-bomb", cwd=repo).returncode == 0
    assert list(limits.recorded(handoff_home)) == [], "close leaves none of its cgroups"
    assert not any(d.exists() for d in made)


@fault("32", "a peer fills its sandbox's private /tmp and TMPDIR (64 MiB into each)",
       "each holds at most sandbox.limits.tmp (bubblewrap's --size on every tmpfs of the fence: "
       "/tmp, TMPDIR, the hidden folders' stand-ins); the writes past it fail with ENOSPC, the "
       "peer does its job and the ticket passes",
       "the machine's memory (a tmpfs is RAM), the ticket")
def test_a_peer_filling_tmp_hits_the_cap(repo: Path, tmp_path: Path,
                                         handoff_home: Path) -> None:
    found, final = peer_attacks(repo, tmp_path, handoff_home, "fill-tmp")
    assert found["got_through"] is False, found
    sizes = dict(part.split(": ") for part in found["detail"].split(", "))
    assert len(sizes) == 2 and set(sizes.values()) == {"8 MiB"}, found
    assert final["phase"] == "passed", final
    assert handoff("close", "BND-fill-tmp", cwd=repo).returncode == 0


@fault("32", "a peer allocates memory without end (2 GiB if nothing stops it)",
       "the kernel kills it at sandbox.limits.memory (its cgroup's memory limit, swap "
       "included); the `death` event (and `handoff log`) says which limit: 'the memory limit "
       "(256 MiB) was reached: the kernel killed 1 process'; the peer is relaunched, does its "
       "job, and the ticket passes",
       "the machine's memory and its other processes, the ticket")
def test_a_peer_that_dies_of_the_memory_limit_is_a_death_that_names_it(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    found, final = peer_attacks(repo, tmp_path, handoff_home, "memory-hog")
    assert found["got_through"] is False and "relaunched" in found["detail"], found
    deaths = [e for e in events(handoff_home, "BND-memory-hog") if e["kind"] == "death"]
    assert len(deaths) == 1, deaths
    assert deaths[0]["limit"] == ("the memory limit (256 MiB) was reached: the kernel killed 1 "
                                  "process"), deaths
    shown = handoff("log", "BND-memory-hog", cwd=repo).stdout
    assert "the memory limit (256 MiB) was reached" in shown, shown
    assert final["phase"] == "passed", final
    assert handoff("close", "BND-memory-hog", cwd=repo).returncode == 0


@fault("32", "the gate's command runs a fork bomb (511 shells if nothing stops it)",
       "held to sandbox.limits.processes by the gate run's own cgroup; the gate fails, its log "
       "and the escalation say 'the process limit (64) was reached: N forks refused'; the run's "
       "cgroup is removed and no process of it is left",
       "the machine's processes, the round's commit and the gate log")
def test_the_gate_s_fork_bomb_is_held_and_fails_the_gate(repo: Path, tmp_path: Path,
                                                         handoff_home: Path) -> None:
    final = gate_attacks(repo, tmp_path, handoff_home, "fork-bomb")
    assert final["phase"] == "escalated", final
    assert "the process limit (64) was reached: " in final["reason"], final["reason"]
    log = (ticket_path(handoff_home, "BNDG-fork-bomb") / "gate-1.log").read_text()
    shown = log.split("attack fork-bomb: ")[1]
    # the attacker's own look (every 20 ms) may miss a bomb held so tightly that it rose and
    # fell between two looks (seen once with both cores busy): that the bomb ran into the
    # limit is the refused forks the gate's own last line counts
    assert shown.startswith("stopped (") and int(shown.split("(")[1].split()[0]) <= 64, log
    refused = re.search(r"the process limit \(64\) was reached: (\d+) forks? refused$",
                        log.splitlines()[-1])
    assert refused is not None and int(refused.group(1)) > 0, log
    assert started_with(handoff_home, "sleep 4") == []
    assert not [n for n, _ in limits.recorded(handoff_home) if ".gate." in n], "its cgroups went"
    assert handoff("close", "BNDG-fork-bomb", cwd=repo).returncode == 0


@fault("32", "the gate's command allocates memory without end (2 GiB if nothing stops it)",
       "the kernel kills it at sandbox.limits.memory; the gate fails however the command "
       "exits, its log and the escalation say 'the memory limit (256 MiB) was reached: the "
       "kernel killed 1 process'",
       "the machine's memory, the round's commit and the gate log")
def test_the_gate_s_memory_hog_is_killed_with_a_readable_reason(repo: Path, tmp_path: Path,
                                                                handoff_home: Path) -> None:
    final = gate_attacks(repo, tmp_path, handoff_home, "memory-hog")
    assert final["phase"] == "escalated", final
    reached = "the memory limit (256 MiB) was reached: the kernel killed 1 process"
    assert reached in final["reason"], final["reason"]
    log = (ticket_path(handoff_home, "BNDG-memory-hog") / "gate-1.log").read_text()
    assert "got through" not in log and log.rstrip().endswith(reached), log
    assert handoff("close", "BNDG-memory-hog", cwd=repo).returncode == 0

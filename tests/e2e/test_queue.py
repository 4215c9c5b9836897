"""The queue: max_parallel bounds the tickets at work on a machine (handoff.record.slots, the
orchestrator's `queued` phase), with real tickets in real tmux."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from bench.scenarios.crowd import LivePeers
from handoff.record import slots
from handoff.record.lock import holder
from tests.conftest import wait_until
from tests.faults.catalog import fault
from tests.harness import (
    events,
    handoff,
    plan_text,
    release,
    spawn,
    state,
    stop_runner,
    ticket_path,
    wait_event,
    wait_phase,
    write_plan,
)

QUICK = [sys.executable, "-c", "print('ok')"]
DONE = ("passed", "escalated", "needs-human")


def limit(home: Path, n: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.yaml").write_text(yaml.safe_dump({"max_parallel": n}))


def quick_plan(folder: Path, name: str = "plan.md", **script: object) -> Path:
    return write_plan(folder, plan_text({1: {"edits": [{"file": "NOTES.md", "content": "x\n"}],
                                             **script}}, test=QUICK), name)


def test_beyond_max_parallel_tickets_queue_show_their_place_and_start_in_order(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    limit(handoff_home, 2)
    held, quick = quick_plan(tmp_path, "held.md", pause_until="go"), quick_plan(tmp_path)
    holders, waiters = ["Q-0", "Q-1"], ["Q-2", "Q-3", "Q-4"]
    # the two holders start side by side and keep their slots until told; the waiters queue one
    # after another, so the order they are owed is known (a ticket that has not asked yet is
    # owed nothing: CI measured a later-made ticket taking a slot its slower sibling never asked
    # for)
    runs = [spawn("start", t, "--plan", str(held), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / f"{t}.log") for t in holders]
    try:
        for ticket in holders:
            wait_event(handoff_home, ticket, "launch", role="implementer")
        with LivePeers(state(handoff_home, holders[0])["socket"], every=0.05) as sampler:
            for ticket in waiters:
                runs.append(spawn("start", ticket, "--plan", str(quick), "--yes", "--foreground",
                                  cwd=repo, log=tmp_path / f"{ticket}.log"))
                wait_phase(handoff_home, ticket, "queued")
            rows = json.loads(handoff("status", "--json", cwd=repo).stdout)
            places = {r["ticket"]: r["queue"]["place"] for r in rows if r["queue"]}
            assert places == {"Q-2": 1, "Q-3": 2, "Q-4": 3}, rows
            assert all(r["queue"]["max_parallel"] == 2 and r["queue"]["at_work"] == 2
                       for r in rows if r["queue"]), rows
            table = handoff("status", "Q-3", cwd=repo).stdout
            assert "queue: 2nd of 3 waiting; 2 of 2 tickets at work" in table, table
            # one holder lets go: with the other still holding, the waiters go one at a time
            release(ticket_path(handoff_home, "Q-0"), "go")
            for ticket in waiters:
                final = wait_phase(handoff_home, ticket, *DONE, timeout=120)
                assert final["phase"] == "passed", final["reason"]
            assert state(handoff_home, "Q-1")["phase"] == "implementing"
            release(ticket_path(handoff_home, "Q-1"), "go")
            for ticket in (*holders, *waiters):
                final = wait_phase(handoff_home, ticket, *DONE, timeout=120)
                assert final["phase"] == "passed", final["reason"]
            for run in runs:  # each ends by itself once its peers have left
                assert run.wait(timeout=60) == 0
        assert sampler.looks > 10
        assert len(sampler.most) <= 2, f"{sampler.most} had live peers at once"
    finally:
        for run in runs:
            stop_runner(run)
    # each waiter went on in its turn, once the one before it had given its slot back
    out, done = {}, {}
    for ticket in waiters:
        moves = [e for e in events(handoff_home, ticket) if e["kind"] == "phase"]
        queued = next(m for m in moves if m["to"] == "queued")
        assert "of 2 tickets at work (max_parallel)" in queued["reason"]
        leaving = next(m for m in moves if m["from"] == "queued")
        assert leaving["to"] == "implementing"
        out[ticket] = leaving["time"]
        done[ticket] = next(m["time"] for m in moves if m["to"] == "passed")
    assert out["Q-2"] < done["Q-2"] < out["Q-3"] < done["Q-3"] < out["Q-4"], (out, done)
    # every slot given back, and the peers' holds with their peers, which leave when their
    # ticket has passed
    wait_until(lambda: not list(slots.folder(handoff_home).iterdir()), 30,
               "every slot given back")
    for ticket in (*holders, *waiters):  # a finished ticket runs no CLI
        retired = [e for e in events(handoff_home, ticket) if e["kind"] == "left"
                   and e["reason"] == "the ticket passed"]
        assert {e["role"] for e in retired} == {"implementer", "reviewer"}
        assert (ticket_path(handoff_home, ticket) / "transcripts").is_dir()


@fault("", "kill -9 of the orchestrator at work (its implementer working on) and of a waiter, "
       "max_parallel 1",
       "the killed ticket stays at work while its peer lives: no other ticket takes its slot (the "
       "limit holds at every moment); resume --all gives it its slot back at once, the others "
       "follow in order once it passed",
       "every ticket's record; the killed one's implementer and its work, its report taken")
def test_a_killed_orchestrators_peers_keep_its_slot_and_resume_all_brings_every_ticket_home(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """kill -9 of the orchestrator at work and of a waiter, max_parallel 1: the killed one's
    implementer works on, so its ticket stays at work and nobody takes its slot (the limit
    holds at every moment); resume --all gives it its slot back at once, and the others follow
    once it passed."""
    limit(handoff_home, 1)
    held = quick_plan(tmp_path, "held.md", pause_until="go")
    quick = quick_plan(tmp_path, "quick.md")
    first = spawn("start", "K-1", "--plan", str(held), "--yes", "--foreground", cwd=repo,
                  log=tmp_path / "K-1.log")
    runs = [first]
    try:
        wait_event(handoff_home, "K-1", "launch", role="implementer")
        for ticket in ("K-2", "K-3"):
            runs.append(spawn("start", ticket, "--plan", str(quick), "--yes", "--foreground",
                              cwd=repo, log=tmp_path / f"{ticket}.log"))
            wait_phase(handoff_home, ticket, "queued")
        # kill -9 of a waiter and of the holder: neither can give anything back
        for run in (runs[1], first):
            run.kill()
            run.wait(timeout=30)
        folder = ticket_path(handoff_home, "K-1")
        wait_until(lambda: holder(folder / "lock") is None, 30, "K-1's lock to drop")
        now = slots.standing(handoff_home)
        assert [h.name for h in now.at_work] == ["K-1"], "its live implementer holds its slot"
        assert [h.name for h in now.waiting] == ["K-3"], now
        assert state(handoff_home, "K-3")["phase"] == "queued"
        resumed = handoff("resume", "--all", cwd=repo)
        assert resumed.returncode == 0, resumed.stderr
        assert "2 of 2 resumed" in resumed.stdout, resumed.stdout
        # K-1 was at work: resumed first, it takes its slot back at once (its own peer's hold
        # is its own), and its implementer's report is taken, not refused
        wait_until(lambda: any(e["kind"] == "orchestrator" for e in events(
            handoff_home, "K-1")[-3:]) and state(handoff_home, "K-1")["phase"] ==
            "implementing", 60, "K-1's new orchestrator at work")
        release(folder, "go")
        for ticket in ("K-1", "K-2", "K-3"):
            final = wait_phase(handoff_home, ticket, *DONE, timeout=120)
            assert final["phase"] == "passed", final["reason"]
        assert not any(e["kind"] == "phase" and e.get("to") == "queued"
                       for e in events(handoff_home, "K-1")), "K-1 never queued"
        k1 = next(e["time"] for e in events(handoff_home, "K-1") if e["kind"] == "phase"
                  and e["to"] == "passed")
        for ticket in ("K-2", "K-3"):
            left = [e["time"] for e in events(handoff_home, ticket) if e["kind"] == "phase"
                    and e["from"] == "queued"][-1]
            assert left > k1, f"{ticket} started only when K-1 gave its slot back"
        again = handoff("resume", "--all", cwd=repo)
        assert again.returncode == 0 and "nothing to resume" in again.stdout
    finally:
        for run in runs:
            stop_runner(run)
        handoff("stop", "K-1", cwd=repo)


def test_now_starts_at_once_over_the_limit(repo: Path, tmp_path: Path,
                                          handoff_home: Path) -> None:
    limit(handoff_home, 1)
    first = spawn("start", "N-1", "--plan", str(quick_plan(tmp_path, "held.md",
                                                            pause_until="go")),
                  "--yes", "--foreground", cwd=repo, log=tmp_path / "N-1.log")
    try:
        wait_event(handoff_home, "N-1", "launch", role="implementer")
        urgent = handoff("start", "N-2", "--plan", str(quick_plan(tmp_path)), "--yes", "--now",
                         cwd=repo)
        assert urgent.returncode == 0, urgent.stderr
        assert "--now starts it anyway" in urgent.stderr
        final = wait_phase(handoff_home, "N-2", *DONE, timeout=90)
        assert final["phase"] == "passed", final["reason"]
        assert not any(e["kind"] == "phase" and e["to"] == "queued"
                       for e in events(handoff_home, "N-2"))
        assert state(handoff_home, "N-2")["jumps_queue"] is True
    finally:
        release(ticket_path(handoff_home, "N-1"), "go")
        stop_runner(first)


def test_start_plans_starts_a_ticket_per_plan_named_by_frontmatter_or_file(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    folder = tmp_path / "plans"
    folder.mkdir()
    named = quick_plan(folder, "first.md").read_text().replace("---\n", "---\nticket: FROM-FM\n", 1)
    (folder / "first.md").write_text(named)
    quick_plan(folder, "PROJ-7.md")
    bad = handoff("start", "--plans", str(folder / "first.md"), str(folder / "first.md"),
                  "--yes", cwd=repo)
    assert bad.returncode != 0 and "both start ticket FROM-FM" in bad.stderr
    assert not list(handoff_home.glob("*/FROM-FM")), "refused before any ticket was made"
    started = handoff("start", "--plans", str(folder / "first.md"), str(folder / "PROJ-7.md"),
                      "--yes", cwd=repo)
    assert started.returncode == 0, started.stderr
    assert "2 of 2 started" in started.stdout
    for ticket in ("FROM-FM", "PROJ-7"):
        final = wait_phase(handoff_home, ticket, *DONE, timeout=90)
        assert final["phase"] == "passed", final["reason"]
    again = handoff("start", "--plans", str(folder / "PROJ-7.md"), "--yes", cwd=repo)
    assert again.returncode == 1 and "PROJ-7: ticket PROJ-7 already exists" in again.stderr
    assert "0 of 1 started" in again.stdout


def test_a_batch_beyond_max_parallel_says_how_many_wait_and_its_first_plans_start_first(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """Four plans, one slot: start says three wait; the slot goes to the first plan whichever
    orchestrator asks first, and the others follow in the order of their plans."""
    limit(handoff_home, 1)
    folder = tmp_path / "plans"
    folder.mkdir()
    names = [f"B-{n}" for n in range(1, 5)]
    for name in names:
        quick_plan(folder, f"{name}.md")
    started = handoff("start", "--plans", *(str(folder / f"{n}.md") for n in names), "--yes",
                      cwd=repo)
    assert started.returncode == 0, started.stderr
    assert "4 of 4 started" in started.stdout
    assert "3 of them wait in the queue (1 tickets at work at most: max_parallel)" in \
        started.stdout, started.stdout
    for name in names:
        assert wait_phase(handoff_home, name, *DONE, timeout=120)["phase"] == "passed"
    # when each one's implementer was first launched: one at a time, in the plans' order
    at_work = {name: next(e["time"] for e in events(handoff_home, name)
                          if e["kind"] == "launch" and e.get("role") == "implementer")
               for name in names}
    assert sorted(names, key=lambda n: at_work[n]) == names, at_work

"""handoff.machinery.peers: allowlisted environments, and peers in real tmux windows on the private socket."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from handoff.machinery import reaper
from handoff.machinery.peers import ORCHESTRATOR_WINDOW, Peers, allowlisted_env, session_name
from handoff.machinery.tmux import TERM, ServerGone, Tmux
from handoff.protocol.frontmatter import join
from handoff.providers.base import Launch, Provider, first_message
from handoff.providers.scripted import Scripted
from handoff.record.store import validate_ticket_id
from handoff.signs import TOOK
from tests.conftest import git, read_json, wait_until
from tests.unit.machinery import test_peers as unit_tests

#: the fixtures this module's unit tests define, shared
secrets = unit_tests.secrets

PY = sys.executable

# Writes what the peer process sees (atomically), then waits for one line on its terminal.
DUMP = """\
import json, os, sys
out = sys.argv[1]
with open(out + '.tmp', 'w') as f:
    json.dump({'env': dict(os.environ), 'argv': sys.argv[2:], 'cwd': os.getcwd()}, f)
os.replace(out + '.tmp', out)
print('peer started on', sys.argv[-1], flush=True)
sys.stdin.readline()
"""


class DumpingCli(Provider):
    """A stand-in coding CLI (a real program in the pane) that reports what it was given."""

    name = "dumping"

    def __init__(self, out: Path) -> None:
        super().__init__()
        self.out = out

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        return [PY, "-c", DUMP, str(self.out), launch.message]

    def taken(self, screen: str, message: str) -> bool:
        return False



def brief_file(peers: Peers, role: str, n: int) -> Path:
    path = peers.ticket_dir / "inbox" / role / f"brief-{n}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# brief {n}\n", encoding="utf-8")
    return path


# --- launch: the peer process really sees only that environment ------------------------------

def test_launched_peer_sees_exactly_the_allowlisted_env(secrets: dict[str, str], peers: Peers,
                                                        tmp_path: Path) -> None:
    # The secrets were set (fixture order) before the tmux server started: the server never
    # took them (handoff.machinery.tmux.client_env), and a pane would not inherit what a server holds
    # either. Put one there by hand to prove the second.
    assert "ANTHROPIC_API_KEY" not in peers.tmux.run("show-environment", "-g")
    peers.tmux.run("set-environment", "-g", "OPENAI_API_KEY", secrets["OPENAI_API_KEY"])

    out = tmp_path / "seen.json"
    worktree = tmp_path / "work tree"
    worktree.mkdir()
    brief = brief_file(peers, "implementer", 1)
    env = allowlisted_env({"HANDOFF_ROLE": "implementer", "HANDOFF_NOTE": "a b $HOME `id`"},
                          allow=("GITHUB_TOKEN",))

    peers.launch(DumpingCli(out), Launch("T-1", "implementer", worktree, brief), env)

    seen = wait_until(lambda: read_json(out), what="the peer to report its environment")
    peer_env = seen["env"]
    assert isinstance(peer_env, dict)
    assert "ANTHROPIC_API_KEY" not in peer_env
    assert "OPENAI_API_KEY" not in peer_env
    assert "TMUX" not in peer_env and "TMUX_PANE" not in peer_env
    assert peer_env["GITHUB_TOKEN"] == secrets["GITHUB_TOKEN"]
    assert peer_env["HANDOFF_NOTE"] == "a b $HOME `id`"
    assert peer_env["TERM"] == TERM
    # Python itself may add LC_CTYPE (PEP 538 locale coercion) when the locale is plain C.
    # and the marker that lets handoff end what the peer leaves running (handoff.machinery.reaper)
    expected = {**env, "HANDOFF_PEER": f"{peers.ticket_dir}#implementer"}
    assert {k: v for k, v in peer_env.items() if k != "LC_CTYPE"} == \
        {k: v for k, v in expected.items() if k != "LC_CTYPE"}
    assert seen["argv"] == [first_message(brief)]
    assert Path(str(seen["cwd"])).resolve() == worktree.resolve()


def test_launch_opens_a_window_per_role_and_tags_it(peers: Peers, tmp_path: Path) -> None:
    brief_i, brief_r = brief_file(peers, "implementer", 1), brief_file(peers, "reviewer", 1)

    pane_i = peers.launch(DumpingCli(tmp_path / "i.json"),
                          Launch("T-1", "implementer", tmp_path, brief_i), allowlisted_env({}))
    pane_r = peers.launch(DumpingCli(tmp_path / "r.json"),
                          Launch("T-1", "reviewer", tmp_path, brief_r), allowlisted_env({}))

    panes = peers.tmux.panes(peers.session)
    assert set(panes) == {ORCHESTRATOR_WINDOW, "implementer", "reviewer"}
    assert panes["implementer"].id == pane_i and panes["reviewer"].id == pane_r
    assert panes["implementer"].mark == str(brief_i)
    assert panes["reviewer"].mark == str(brief_r)


# --- working_on --------------------------------------------------------------------------------

def test_working_on_follows_launches_and_is_empty_once_the_process_died(peers: Peers,
                                                                        tmp_path: Path) -> None:
    assert peers.working_on("implementer") == ""
    first, second = brief_file(peers, "implementer", 1), brief_file(peers, "implementer", 2)
    cli = DumpingCli(tmp_path / "seen.json")

    pane = peers.launch(cli, Launch("T-1", "implementer", tmp_path, first), allowlisted_env({}))
    assert peers.working_on("implementer") == str(first)

    again = peers.launch(cli, Launch("T-1", "implementer", tmp_path, second), allowlisted_env({}))
    assert again == pane  # the same window, respawned
    wait_until(lambda: str(second) in peers.tmux.capture(pane), what="the relaunched peer")
    assert peers.working_on("implementer") == str(second)

    peers.tmux.send_enter(pane)  # the program reads one line, then exits

    wait_until(lambda: peers.working_on("implementer") == "", what="working_on to drop the brief")
    dead = peers.pane("implementer")
    assert dead is not None and dead.dead
    assert dead.mark == str(second)  # the tag stays; only a live process counts


# --- retire ------------------------------------------------------------------------------------

def test_retire_saves_the_transcript_and_removes_the_window(peers: Peers, tmp_path: Path) -> None:
    brief = brief_file(peers, "reviewer", 1)
    pane = peers.launch(DumpingCli(tmp_path / "seen.json"),
                        Launch("T-1", "reviewer", tmp_path, brief), allowlisted_env({}))
    wait_until(lambda: "peer started on" in peers.tmux.capture(pane), what="the peer's output")
    transcript = peers.ticket_dir / "transcripts" / "reviewer-1.txt"

    assert peers.retire("reviewer", transcript) is True

    text = transcript.read_text(encoding="utf-8")
    assert f"peer started on {first_message(brief)}" in text
    assert peers.pane("reviewer") is None
    assert set(peers.tmux.panes(peers.session)) == {ORCHESTRATOR_WINDOW}
    assert peers.working_on("reviewer") == ""
    assert peers.retire("reviewer", peers.ticket_dir / "transcripts" / "again.txt") is False
    assert not (peers.ticket_dir / "transcripts" / "again.txt").exists()


def test_capture_saves_history_without_ending_the_peer(peers: Peers, tmp_path: Path) -> None:
    brief = brief_file(peers, "implementer", 1)
    pane = peers.launch(DumpingCli(tmp_path / "seen.json"),
                        Launch("T-1", "implementer", tmp_path, brief), allowlisted_env({}))
    wait_until(lambda: "peer started on" in peers.tmux.capture(pane), what="the peer's output")
    saved = tmp_path / "capture" / "implementer.txt"

    assert peers.capture("implementer", saved) is True
    assert "peer started on" in saved.read_text(encoding="utf-8")
    assert peers.working_on("implementer") == str(brief)
    assert peers.capture("reviewer", tmp_path / "none.txt") is False


# --- deliver, with the built-in scripted agent -------------------------------------------------

def reviewer_brief(peers: Peers, repo: Path, n: int) -> Path:
    """A real reviewer brief the scripted agent can act on: no test commands, so it passes."""
    plan = peers.ticket_dir / "plan.md"
    plan.write_text("# Fix calc\n\nNothing scripted.\n", encoding="utf-8")
    path = peers.ticket_dir / "inbox" / "reviewer" / f"brief-{n}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = peers.ticket_dir / "drafts" / f"review-report-{n}.md"
    fields = {"ticket": "T-1", "role": "reviewer", "round": n, "worktree": str(repo),
              "plan": str(plan), "commit": git(repo, "rev-parse", "HEAD"), "tests": [],
              "report": str(draft), "submit": [PY, "-c", "print('submitted')"]}
    path.write_text(join(fields, f"# review round {n}\n"), encoding="utf-8")
    return path


@pytest.fixture
def scripted_reviewer(peers: Peers, repo: Path) -> str:
    """The scripted agent running as reviewer, done with its first brief and waiting."""
    first = reviewer_brief(peers, repo, 1)
    pane = peers.launch(Scripted(), Launch("T-1", "reviewer", repo, first), allowlisted_env({}))
    wait_until(lambda: "scripted: waiting for the next message" in peers.tmux.capture(pane),
               what="the scripted reviewer to finish its first brief")
    return pane


def test_deliver_pastes_into_the_scripted_agent_and_sees_it_taken(
        peers: Peers, repo: Path, scripted_reviewer: str) -> None:
    second = reviewer_brief(peers, repo, 2)
    provider: Provider = Scripted()

    assert peers.deliver_brief(provider, "reviewer", second).taken is True

    history = peers.tmux.capture(scripted_reviewer)
    took = [ln for ln in history.splitlines() if ln.startswith(f"{TOOK} {first_message(second)}")]
    assert len(took) == 1
    assert peers.working_on("reviewer") == str(second)
    wait_until(lambda: (peers.ticket_dir / "drafts" / "review-report-2.md").exists(),
               what="the agent to act on the delivered brief")


def test_deliver_of_a_brief_already_taken_never_sends_it_twice(
        peers: Peers, repo: Path, scripted_reviewer: str) -> None:
    second = reviewer_brief(peers, repo, 2)
    assert peers.deliver_brief(Scripted(), "reviewer", second).taken is True
    took = f"{TOOK} {first_message(second)}"
    wait_until(lambda: "waiting for the next message" in
               peers.tmux.capture(scripted_reviewer).split(took, 1)[-1],
               what="the agent to finish the brief and wait for input")
    peers.tmux.mark_pane(scripted_reviewer, "")  # as if we crashed before remembering the delivery

    assert peers.deliver_brief(Scripted(), "reviewer", second).taken is True
    assert peers.working_on("reviewer") == str(second)
    # the agent reads its input in order: once a later message is taken, a duplicate would show
    third = reviewer_brief(peers, repo, 3)
    assert peers.deliver_brief(Scripted(), "reviewer", third).taken is True

    history = peers.tmux.capture(scripted_reviewer)
    print(history)
    assert history.count(f"{TOOK} {first_message(second)}") == 1


def test_deliver_gives_up_when_the_message_is_never_taken(
        peers: Peers, repo: Path, scripted_reviewer: str) -> None:
    not_a_brief = peers.ticket_dir / "notes.txt"  # the scripted agent ignores non-.md paths

    delivery = peers.deliver(Scripted(), "reviewer", first_message(not_a_brief), tries=2,
                             wait=0.5)
    assert delivery.taken is False and "not taken after 2 tries" in delivery.why

    assert peers.working_on("reviewer") != str(not_a_brief)
    assert "scripted: ignoring" in peers.tmux.capture(scripted_reviewer)


def test_deliver_to_a_missing_or_dead_peer_is_false(peers: Peers, repo: Path,
                                                    tmp_path: Path) -> None:
    brief = brief_file(peers, "implementer", 1)
    assert peers.deliver_brief(Scripted(), "implementer", brief).taken is False

    pane = peers.launch(DumpingCli(tmp_path / "seen.json"),
                        Launch("T-1", "implementer", tmp_path, brief), allowlisted_env({}))
    peers.tmux.send_enter(pane)
    wait_until(lambda: (p := peers.pane("implementer")) is not None and p.dead,
               what="the peer to exit")

    assert peers.deliver_brief(Scripted(), "implementer", brief).taken is False


# --- when tmux itself goes away (issue 6, items 13 and 17) --------------------------------------

def test_a_gone_server_is_no_pane_yet_look_tells_it_and_the_session_comes_back(
        peers: Peers, tmp_path: Path) -> None:
    peers.launch(DumpingCli(tmp_path / "seen.json"),
                 Launch("T-1", "implementer", tmp_path, brief_file(peers, "implementer", 1)),
                 allowlisted_env({}))
    assert peers.look("implementer") is not None
    subprocess.run(["tmux", "-L", peers.tmux.socket, "kill-server"], check=True, timeout=15)

    assert peers.pane("implementer") is None
    assert peers.working_on("implementer") == ""
    with pytest.raises(ServerGone):
        peers.look("implementer")

    assert peers.ensure_session(tmp_path, [PY, "-c", "import time; time.sleep(600)"]) is True
    assert peers.look("implementer") is None, "a new session: the role's window is gone"
    assert set(peers.tmux.panes(peers.session)) == {ORCHESTRATOR_WINDOW}
    assert peers.ensure_session(tmp_path, [PY, "-c", "raise SystemExit(9)"]) is False


# ignores SIGHUP and SIGTERM in a session of its own, like a command a CLI started
STUBBORN = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "signal.signal(signal.SIGHUP, signal.SIG_IGN); time.sleep(600)")


class LeavingCli(Provider):
    """A CLI that leaves a helper running past its pane."""

    name = "leaving"

    def missing(self) -> str | None:
        return None

    def argv(self, launch: Launch) -> list[str]:
        code = ("import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
                f"{STUBBORN!r}], start_new_session=True); time.sleep(600)")
        return [PY, "-c", code]


def marked(mark: str, count: int) -> list[int] | None:
    """The processes carrying mark, once there are exactly count of them."""
    found = reaper.marked(mark)
    return found if len(found) == count else None


def test_launch_after_the_window_was_killed_ends_what_the_old_peer_left(
        peers: Peers, tmp_path: Path) -> None:
    brief = brief_file(peers, "implementer", 1)
    mark = reaper.marker(peers.ticket_dir, "implementer")
    pane = peers.launch(LeavingCli(), Launch("T-1", "implementer", tmp_path, brief),
                        allowlisted_env({}))
    old = set(wait_until(lambda: marked(mark, 2), what="the CLI and its helper"))
    peers.tmux.kill_pane(pane)  # a person closed the window: the CLI goes, its helper stays
    left = wait_until(lambda: marked(mark, 1), what="only the helper to be left")

    peers.launch(LeavingCli(), Launch("T-1", "implementer", tmp_path, brief), allowlisted_env({}))

    now = set(wait_until(lambda: marked(mark, 2), what="the new CLI and its helper"))
    assert not now & old, f"the old helper {left} still runs beside the new peer"
    assert peers.stop() is True
    assert reaper.marked(mark) == []


def test_stop_ends_the_session(peers: Peers) -> None:
    assert peers.tmux.has_session(peers.session)
    assert peers.stop() is True
    assert not peers.tmux.has_session(peers.session)
    assert peers.stop() is False


# --- session_name ------------------------------------------------------------------------------

def test_session_name_with_a_dot_in_the_ticket_id_is_usable_in_tmux(
        socket: str, handoff_home: Path, tmp_path: Path) -> None:
    ticket = validate_ticket_id("REL.2.1")
    name = session_name(ticket, "repo-0123456789")
    assert "." not in name and ":" not in name
    tmux = Tmux(socket, handoff_home)

    tmux.new_session(name, "main", [PY, "-c", "import sys; sys.stdin.readline()"], tmp_path)

    assert tmux.has_session(name)
    assert set(tmux.panes(name)) == {"main"}
    assert name in tmux.run("list-sessions", "-F", "#{session_name}").splitlines()


# --- steady ------------------------------------------------------------------------------------

DRAWING = """
import sys, time
for n in range(int(sys.argv[1])):
    print(f"drawing {n}", flush=True)
    time.sleep(0.05)
print("dialog ready", flush=True)
time.sleep(600)
"""


def test_steady_waits_until_a_drawing_screen_holds_still(peers: Peers, tmp_path: Path) -> None:
    peers.tmux.new_window(peers.session, "implementer", [PY, "-c", DRAWING, "16"], tmp_path)
    assert peers.steady("implementer")
    assert "dialog ready" in (peers.screen("implementer") or ""), "it waited for the last draw"


def test_steady_gives_up_at_its_bound_on_a_screen_that_never_settles(peers: Peers,
                                                                    tmp_path: Path) -> None:
    peers.tmux.new_window(peers.session, "implementer", [PY, "-c", DRAWING, "100000"], tmp_path)
    assert not peers.steady("implementer", wait=1.0)


#: an agent of a person's own, as docs/configuration.md's example of a `command` peer: a
#: prompt it draws, each line it reads said back in words of its own (no echo of the message
#: a provider's rules could read), and the lines it got, counted in a file
FAKE_AGENT = """\
import sys, termios
got = sys.argv[1]
# a TUI draws its input itself: the terminal echoes nothing of what is typed
mode = termios.tcgetattr(0)
mode[3] &= ~termios.ECHO
termios.tcsetattr(0, termios.TCSANOW, mode)
while True:
    print("fake-agent> ", end="", flush=True)
    line = sys.stdin.readline()
    if not line:
        break
    with open(got, "a") as out:
        out.write(line)
    print("working on it", flush=True)
"""


def test_an_answer_a_command_peer_took_is_delivered_exactly_once(
        peers: Peers, tmp_path: Path) -> None:
    """Its composer marker reads the input line: the message left it and the screen moved on,
    so it was taken, though nothing on the screen repeats it; it is never pasted again (it
    used to be, three times, and the peer restarted)."""
    from handoff.providers import RoleSpec, get

    program, got = tmp_path / "agent.py", tmp_path / "got.txt"
    program.write_text(FAKE_AGENT, encoding="utf-8")
    provider = get(RoleSpec(provider="command", command=(PY, str(program), str(got)),
                            markers={"composer": "fake-agent>"}))
    brief = brief_file(peers, "implementer", 1)
    pane = peers.launch(provider, Launch("T-1", "implementer", tmp_path, brief),
                        allowlisted_env({}))
    wait_until(lambda: "fake-agent>" in peers.tmux.capture(pane), what="its prompt")
    # as long as a real one: wider than the pane, so its echo wraps
    answer = ("A person answered: use the second API, the first one is deprecated and its "
              "rate limits are too low for the batch job -- Read and follow "
              f"{brief} to the end and file your report with its submit command.")
    delivery = peers.deliver(provider, "implementer", answer, wait=1.0)
    assert delivery.taken, delivery.why
    wait_until(lambda: got.exists() and got.read_text(encoding="utf-8").strip(),
               what="the agent to read the line")
    assert got.read_text(encoding="utf-8").splitlines() == [answer], "once, and whole"

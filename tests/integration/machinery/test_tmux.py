"""handoff.machinery.tmux.Tmux against a real tmux server on the test's private socket."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from handoff.machinery import tmux as tmux_module
from handoff.machinery.tmux import (
    BASE_ENV,
    HEIGHT,
    TIMEOUT_VARIABLE,
    Pane,
    ServerGone,
    Tmux,
    TmuxFailure,
)
from tests.conftest import read_json, wait_until
from tests.unit.machinery import test_tmux as unit_tests
from tests.unit.machinery.test_tmux import BLOCK, SECRET_ENV, environ_of

#: the fixtures this module's unit tests define, shared
short_tmpdir = unit_tests.short_tmpdir
tmux = unit_tests.tmux

PY = sys.executable


REPORT = """\
import json, os, sys
out = sys.argv[1]
with open(out + '.tmp', 'w') as f:
    json.dump({'argv': sys.argv[2:], 'cwd': os.getcwd(), 'pid': os.getpid()}, f)
os.replace(out + '.tmp', out)
sys.stdin.readline()
"""

READER = """\
import sys
out = sys.argv[1]
print('reader ready', flush=True)
while True:
    line = sys.stdin.readline()
    if not line:
        break
    with open(out, 'a') as f:
        f.write(line)
"""


def socket_file(name: str) -> Path:
    return Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / name



def text_of(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def ended(tmux: Tmux, session: str, window: str) -> Pane | None:
    """The window's pane once it is dead and tmux has its exit status.

    tmux marks a pane dead when its pty closes, before it reaps the child. Worse, Debian's tmux
    3.3a (linked with libutempter) can lose the child's SIGCHLD for good: libutempter sets
    SIGCHLD to SIG_DFL while its helper runs at pane close. tmux reaps every zombie on its next
    SIGCHLD, so a `run-shell true` job nudges it without touching the pane.
    """
    pane = tmux.panes(session).get(window)
    if pane is None or not pane.dead:
        return None
    if pane.status is None:
        tmux.run("run-shell", "true")
        return None
    return pane


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_new_session_runs_argv_directly_without_a_shell(tmux: Tmux, tmp_path: Path) -> None:
    out = tmp_path / "argv.json"
    cwd = tmp_path / "a work dir"
    cwd.mkdir()
    args = ["two words", "$HOME", "a; echo injected > x", "`id`", "*", "'single'", '"double"', ""]
    pane = tmux.new_session("s", "main", [PY, "-c", REPORT, str(out), *args], cwd)

    seen = wait_until(lambda: read_json(out), what="the program to report its argv")
    assert seen["argv"] == args
    assert Path(str(seen["cwd"])).resolve() == cwd.resolve()
    assert not (cwd / "x").exists()
    assert pane.startswith("%")
    assert tmux.panes("s")["main"].id == pane


def test_arguments_ending_in_a_semicolon_reach_the_program_as_given(tmux: Tmux,
                                                                    tmp_path: Path) -> None:
    # tmux takes an argument ending in `;` as the end of its command: `find -exec … ;` or a
    # prompt ending so would cut the program's argv, or fail the whole call
    args = ["a;", ";", "b\\;", "\\", "c"]
    out, again = tmp_path / "argv.json", tmp_path / "again.json"
    tmux.new_session("s", "main", [PY, "-c", REPORT, str(out), *args], tmp_path)
    tmux.new_window("s", "second", [PY, "-c", REPORT, str(again), *args], tmp_path)
    for path in (out, again):
        seen = wait_until(partial(read_json, path), what="the program's argv")
        assert seen["argv"] == args


def test_a_new_window_is_pinned_at_the_fixed_size_even_beside_one_of_its_name(
        tmux: Tmux, tmp_path: Path) -> None:
    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    first = tmux.new_window("s", "twin", [PY, "-c", BLOCK], tmp_path)
    second = tmux.new_window("s", "twin", [PY, "-c", BLOCK], tmp_path)  # found by id, not name
    for pane in (first, second):
        size = tmux.run("display-message", "-p", "-t", pane,
                        "#{window_width}x#{window_height} #{window-size}")
        assert size == f"{tmux_module.WIDTH}x{HEIGHT} manual", pane


def _nice_and_group(pid: int) -> tuple[int, str]:
    """A process's niceness and its session's scheduling group's (autogroup) niceness."""
    group = Path(f"/proc/{pid}/autogroup").read_text(encoding="ascii").split()[-1]
    return os.getpriority(os.PRIO_PROCESS, pid), group


def test_a_pane_made_with_a_niceness_yields_from_its_start_and_the_server_does_not(
        tmux: Tmux, tmp_path: Path) -> None:
    # the program never renices itself: whatever niceness it has, its maker gave it
    first = tmux.new_session("s", "main", ["sleep", "300"], tmp_path, nice=7)
    second = tmux.new_window("s", "other", ["sleep", "300"], tmp_path, nice=9)
    plain = tmux.new_window("s", "plain", ["sleep", "300"], tmp_path)
    panes = tmux.panes("s")
    assert (panes["main"].id, panes["other"].id, panes["plain"].id) == (first, second, plain)
    assert _nice_and_group(panes["main"].pid) == (7, "7")
    assert _nice_and_group(panes["other"].pid) == (9, "9")
    assert _nice_and_group(panes["plain"].pid) == (0, "0")
    server = int(tmux.run("display-message", "-p", "#{pid}").strip())
    assert _nice_and_group(server) == (0, "0"), "the tmux server keeps its weight"


def test_new_session_unless_there_leaves_an_existing_session_alone(tmux: Tmux,
                                                                   tmp_path: Path) -> None:
    marker = tmp_path / "second-ran"
    first = tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    again = tmux.new_session_unless_there(
        "s", "main", [PY, "-c", f"open({str(marker)!r}, 'w')"], tmp_path)
    assert again is None
    panes = tmux.panes("s")
    assert list(panes) == ["main"] and panes["main"].id == first and not panes["main"].dead
    with pytest.raises(TmuxFailure, match="duplicate session"):
        tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    assert not marker.exists()


def test_new_session_runs_a_single_element_argv_directly(tmux: Tmux, tmp_path: Path) -> None:
    folder = tmp_path / "dir with space"
    folder.mkdir()
    marker = tmp_path / "ran"
    program = folder / "prog"
    program.write_text(f"#!{PY}\nopen({str(marker)!r}, 'w').write('ran')\n", encoding="utf-8")
    program.chmod(0o755)

    tmux.new_session("s", "main", [str(program)], tmp_path)

    pane = wait_until(lambda: ended(tmux, "s", "main"),
                      what="the single-argument program to end")
    assert marker.exists(), f"the program never ran (pane exit status {pane.status})"
    assert pane.status == 0


def test_dead_pane_stays_readable_with_its_exit_status(tmux: Tmux, tmp_path: Path) -> None:
    code = "import sys; print('last words before exit', flush=True); sys.exit(7)"
    pane = tmux.new_session("s", "main", [PY, "-c", code], tmp_path)

    dead = wait_until(lambda: ended(tmux, "s", "main"),
                      what="the pane to die")
    assert dead.id == pane
    assert dead.status == 7
    assert tmux.has_session("s")
    assert "last words before exit" in tmux.capture(pane)


def test_live_pane_is_not_dead_and_has_no_status(tmux: Tmux, tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    tmux.new_session("s", "main", [PY, "-c", REPORT, str(out)], tmp_path)
    seen = wait_until(lambda: read_json(out), what="the program to start")

    live = tmux.panes("s")["main"]
    assert not live.dead
    assert live.status is None
    assert live.pid == seen["pid"]


def test_users_own_tmux_conf_is_not_loaded(tmux: Tmux, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".tmux.conf").write_text("set -g remain-on-exit off\nset -g @from_user_conf yes\n",
                                     encoding="utf-8")
    tmux.new_session("keep", "main", [PY, "-c", BLOCK], tmp_path)
    tmux.new_window("keep", "short", [PY, "-c", "raise SystemExit(3)"], tmp_path)

    def died() -> Pane | None:
        pane = tmux.panes("keep").get("short")
        return pane if pane is not None and pane.dead else None

    dead = wait_until(died, what="the short-lived window to die (and stay)")
    # tmux 3.3a now and then never records the status of a child that exits at once
    assert dead.status in (3, None)
    assert tmux.run("show-options", "-gqv", "@from_user_conf") == ""


def test_panes_are_listed_by_window_name(tmux: Tmux, tmp_path: Path) -> None:
    outs = {name: tmp_path / f"{name}.json" for name in ("orchestrator", "implementer", "reviewer")}
    ids = {"orchestrator": tmux.new_session("tk", "orchestrator",
                                            [PY, "-c", REPORT, str(outs["orchestrator"])], tmp_path)}
    for name in ("implementer", "reviewer"):
        ids[name] = tmux.new_window("tk", name, [PY, "-c", REPORT, str(outs[name])], tmp_path)
    pids = {name: wait_until(partial(read_json, out), what=f"{name} to start")["pid"]
            for name, out in outs.items()}

    panes = tmux.panes("tk")
    assert set(panes) == {"orchestrator", "implementer", "reviewer"}
    assert len(set(ids.values())) == 3
    for name, pane in panes.items():
        assert pane.window == name
        assert pane.id == ids[name]
        assert pane.pid == pids[name]
        assert not pane.dead


def test_panes_of_a_missing_session_is_empty(tmux: Tmux, tmp_path: Path) -> None:
    tmux.new_session("present", "main", [PY, "-c", BLOCK], tmp_path)
    assert tmux.panes("nothing-here") == {}
    assert set(tmux.panes("present")) == {"main"}


def test_session_names_are_exact_never_prefixes(tmux: Tmux, tmp_path: Path) -> None:
    tmux.new_session("abc-long", "main", [PY, "-c", BLOCK], tmp_path)

    assert tmux.has_session("abc-long")
    assert not tmux.has_session("abc")
    assert tmux.panes("abc") == {}
    assert tmux.kill_session("abc") is False
    assert tmux.has_session("abc-long")


def test_respawn_replaces_the_process_in_the_same_pane(tmux: Tmux, tmp_path: Path) -> None:
    first, second, child_file = tmp_path / "first.json", tmp_path / "second.json", tmp_path / "child"
    spawner = (
        "import subprocess, sys\n"
        f"child = subprocess.Popen([{PY!r}, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(child_file)!r} + '.tmp', 'w').write(str(child.pid))\n"
        f"import os; os.replace({str(child_file)!r} + '.tmp', {str(child_file)!r})\n"
        + REPORT
    )
    pane = tmux.new_session("s", "main", [PY, "-c", spawner, str(first)], tmp_path)
    old_pid = wait_until(lambda: read_json(first), what="the first program")["pid"]
    child_pid = int(wait_until(lambda: text_of(child_file),
                               what="the first program's child"))
    assert isinstance(old_pid, int)
    try:
        tmux.respawn(pane, [PY, "-c", REPORT, str(second), "again"], tmp_path)

        new = wait_until(lambda: read_json(second), what="the respawned program")
        assert new["argv"] == ["again"]
        assert new["pid"] != old_pid
        after = tmux.panes("s")["main"]
        assert after.id == pane
        assert after.pid == new["pid"]
        assert not after.dead
        wait_until(lambda: not pid_alive(old_pid), what="the old process to be gone")
        wait_until(lambda: not pid_alive(child_pid), what="the old process's child to be gone")
    finally:
        if pid_alive(child_pid):
            os.kill(child_pid, 9)


def test_respawn_revives_a_dead_pane(tmux: Tmux, tmp_path: Path) -> None:
    out = tmp_path / "revived.json"
    pane = tmux.new_session("s", "main", [PY, "-c", "raise SystemExit(1)"], tmp_path)
    wait_until(lambda: tmux.panes("s")["main"].dead, what="the pane to die")

    tmux.respawn(pane, [PY, "-c", REPORT, str(out)], tmp_path)

    wait_until(lambda: read_json(out), what="the revived program")
    revived = tmux.panes("s")["main"]
    assert revived.id == pane and not revived.dead and revived.status is None


def test_capture_sees_history_beyond_the_screen(tmux: Tmux, tmp_path: Path) -> None:
    lines = 4 * HEIGHT
    long_line = "W" * 450  # wider than the 200-column pane: wrapped on screen
    code = (f"for i in range({lines}): print(f'line-{{i:04d}}')\n"
            f"print({long_line!r})\nprint('all printed', flush=True)\n" + BLOCK)
    pane = tmux.new_session("s", "main", [PY, "-c", code], tmp_path)

    wait_until(lambda: "all printed" in tmux.screen(pane), what="the output to finish")
    history = tmux.capture(pane)
    screen = tmux.screen(pane)
    assert "line-0000" in history
    assert f"line-{lines - 1:04d}" in history
    assert all(f"line-{i:04d}" in history for i in range(lines))
    assert "line-0000" not in screen
    assert long_line in history.splitlines()


def test_paste_delivers_text_to_a_program_reading_stdin(tmux: Tmux, tmp_path: Path) -> None:
    out = tmp_path / "got.txt"
    pane = tmux.new_session("s", "main", [PY, "-c", READER, str(out)], tmp_path)
    wait_until(lambda: "reader ready" in tmux.capture(pane), what="the reader to start")

    first = "Read and follow /tmp/x y/brief-1.md; echo $HOME `id`"
    tmux.paste(pane, first)
    wait_until(lambda: text_of(out), what="the first line")
    tmux.paste(pane, "second message")
    wait_until(lambda: out.read_text(encoding="utf-8").count("\n") >= 2, what="the second line")

    assert out.read_text(encoding="utf-8").splitlines() == [first, "second message"]
    assert not tmux.panes("s")["main"].dead


def test_tag_round_trip_per_pane(tmux: Tmux, tmp_path: Path) -> None:
    tagged = tmux.new_session("s", "a", [PY, "-c", BLOCK], tmp_path)
    other = tmux.new_window("s", "b", [PY, "-c", BLOCK], tmp_path)

    def marks(window: str) -> tuple[str, str]:
        pane = tmux.panes("s")[window]
        return pane.mark, pane.session_mark

    assert marks("a") == ("", "")
    tmux.mark_pane(tagged, "/state/T-1/inbox/implementer/brief 1.md")
    assert marks("a") == ("/state/T-1/inbox/implementer/brief 1.md", "")
    assert marks("b") == ("", "")
    tmux.mark_pane(tagged, "/state/T-1/inbox/implementer/brief-2.md")
    assert marks("a") == ("/state/T-1/inbox/implementer/brief-2.md", "")
    # several marks in one call, a value ending in ';' kept as it is (not tmux's separator)
    tmux.mark_pane_with(other, {"@handoff": "warm;", "@handoff-session": "5f0c-aa"})
    assert marks("b") == ("warm;", "5f0c-aa")
    assert marks("a") == ("/state/T-1/inbox/implementer/brief-2.md", "")


def test_a_mark_holding_a_tab_or_a_newline_is_read_whole_and_its_pane_is_still_listed(
        tmux: Tmux, tmp_path: Path) -> None:
    # the mark is read with the listing: a brief's path is under HANDOFF_HOME, which a person
    # may name with any character but NUL and '/'
    tmux.new_session("s", "a", [PY, "-c", BLOCK], tmp_path)
    odd = tmux.new_window("s", "b", [PY, "-c", BLOCK], tmp_path)
    tmux.new_window("s", "c", [PY, "-c", BLOCK], tmp_path)
    path = "/home/p\tq/\nstate\nT-1/inbox/brief-1.md"
    tmux.mark_pane_with(odd, {"@handoff": path, "@handoff-session": "s-1"})

    panes = tmux.panes("s")
    assert sorted(panes) == ["a", "b", "c"]
    assert (panes["b"].mark, panes["b"].session_mark) == (path, "s-1")
    assert panes["c"].mark == "" and not panes["c"].dead


def test_kill_pane_removes_its_window(tmux: Tmux, tmp_path: Path) -> None:
    tmux.new_session("s", "keep", [PY, "-c", BLOCK], tmp_path)
    gone = tmux.new_window("s", "gone", [PY, "-c", BLOCK], tmp_path)

    tmux.kill_pane(gone)

    assert set(tmux.panes("s")) == {"keep"}


def test_kill_session_stops_the_server_and_removes_its_socket(tmux: Tmux, socket: str,
                                                              tmp_path: Path) -> None:
    tmux.new_session("only", "main", [PY, "-c", BLOCK], tmp_path)
    assert socket_file(socket).exists()

    assert tmux.kill_session("only") is True

    assert not socket_file(socket).exists()
    assert not tmux.has_session("only")
    listing = subprocess.run(["tmux", "-L", socket, "list-sessions"], capture_output=True,
                             text=True, timeout=15)
    assert listing.returncode != 0
    assert tmux.kill_session("only") is False


def test_stop_if_empty_after_the_last_session_was_killed(tmux: Tmux, socket: str,
                                                           tmp_path: Path) -> None:
    tmux.new_session("only", "main", [PY, "-c", BLOCK], tmp_path)
    tmux.run("kill-session", "-t", "=only", check=False)

    tmux.stop_if_empty()

    assert not socket_file(socket).exists()
    assert not tmux.has_session("only")
    with pytest.raises(ServerGone):
        tmux.panes("only")


def test_killing_one_session_keeps_the_server_for_the_others(tmux: Tmux, socket: str,
                                                             tmp_path: Path) -> None:
    tmux.new_session("first", "main", [PY, "-c", BLOCK], tmp_path)
    tmux.new_session("second", "main", [PY, "-c", BLOCK], tmp_path)

    assert tmux.kill_session("first") is True
    tmux.stop_if_empty()

    assert tmux.has_session("second")
    assert not tmux.has_session("first")
    assert socket_file(socket).exists()
    assert not tmux.panes("second")["main"].dead


@pytest.fixture
def other_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A tmux server on another unique socket, like a user's or another test's own."""
    name = f"handoff-test-other-{uuid.uuid4().hex[:10]}"
    pid_file = tmp_path / "other.pid"
    code = (f"import os; open({str(pid_file)!r} + '.tmp', 'w').write(str(os.getpid())); "
            f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r}); " + BLOCK)
    try:
        subprocess.run(["tmux", "-L", name, "-f", os.devnull, "new-session", "-d", "-s", "keepme",
                        "--", PY, "-c", code], check=True, capture_output=True, timeout=15)
        pid = int(wait_until(lambda: text_of(pid_file),
                             what="the other server's program"))
        yield name, pid
    finally:
        subprocess.run(["tmux", "-L", name, "kill-server"], capture_output=True, timeout=15)
        socket_file(name).unlink(missing_ok=True)


def default_server() -> dict[str, int]:
    """The person's own default tmux server, as its sessions show it: name → server pid."""
    listed = subprocess.run(["tmux", "list-sessions", "-F", "#{session_name} #{pid}"],
                            capture_output=True, text=True, timeout=15).stdout
    return {name: int(pid) for name, pid in (line.rsplit(" ", 1) for line in listed.splitlines())}


def test_other_servers_and_the_default_one_are_never_touched(
        tmux: Tmux, socket: str, other_server: tuple[str, int], tmp_path: Path) -> None:
    """Nothing of ours reaches the default server. Observed without racing the person, who
    may start or end sessions of their own meanwhile: none of our sessions appears there, and
    a default server that ran before still runs (the same process)."""
    other, other_pid = other_server
    before = default_server()

    pane = tmux.new_session("mine", "main", [PY, "-c", BLOCK], tmp_path)
    tmux.new_window("mine", "second", [PY, "-c", BLOCK], tmp_path)
    tmux.mark_pane(pane, "x")
    tmux.paste(pane, "hello")
    tmux.respawn(pane, [PY, "-c", BLOCK], tmp_path)
    during = default_server()
    assert tmux.kill_session("mine") is True
    tmux.stop_if_empty()

    assert not socket_file(socket).exists()
    still = subprocess.run(["tmux", "-L", other, "has-session", "-t", "=keepme"],
                           capture_output=True, timeout=15)
    assert still.returncode == 0
    assert socket_file(other).exists()
    assert pid_alive(other_pid)
    assert "mine" not in during, "our session went to the default server"
    for pid in set(before.values()):
        assert pid_alive(pid), "the default server was stopped"


# --- the server's environment (issue 6, item 2) -------------------------------------------------



def server_pid(tmux: Tmux) -> int:
    return int(tmux.run("display-message", "-p", "#{pid}"))


def test_the_server_starts_with_only_the_allowlisted_environment(
        tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, short_tmpdir: Path) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/the-users-own,4242,0")  # run from inside a tmux
    monkeypatch.setenv("TMUX_TMPDIR", str(short_tmpdir))

    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)  # this call starts the server

    assert (short_tmpdir / f"tmux-{os.getuid()}" / tmux.socket).exists(), \
        "TMUX_TMPDIR reaches tmux: the server is where every later client looks for it"
    shown = dict(line.split("=", 1) for line in tmux.run("show-environment", "-g").splitlines()
                 if "=" in line)
    environ = environ_of(server_pid(tmux))
    for seen in (shown, environ):
        assert not set(SECRET_ENV) & set(seen)
        assert not any(value in v for value in SECRET_ENV.values() for v in seen.values())
        assert "TMUX" not in seen
        assert set(seen) <= {*BASE_ENV, "PWD"}  # tmux adds PWD by itself
        assert seen["PATH"] == os.environ["PATH"]
        assert seen["HANDOFF_HOME"] == os.environ["HANDOFF_HOME"]


def test_a_client_that_attaches_hands_its_agent_to_no_session(tmux: Tmux, socket: str,
                                                              tmp_path: Path) -> None:
    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    # a person's own tmux client (as `handoff attach` runs it) carries their SSH agent
    theirs = {**os.environ, "SSH_AUTH_SOCK": "/tmp/ssh-agent-of-a-person", "DISPLAY": ":77"}
    subprocess.run(["tmux", "-L", socket, "new-session", "-d", "-s", "by-hand", "--", PY, "-c",
                    BLOCK], env=theirs, check=True, capture_output=True, timeout=15)

    for session in ("s", "by-hand"):
        shown = tmux.run("show-environment", "-t", f"={session}:")
        assert "ssh-agent-of-a-person" not in shown and ":77" not in shown


# --- gone, server gone, or failing (issue 6, item 17) -------------------------------------------

def test_a_killed_server_is_told_apart_from_a_missing_session(tmux: Tmux, socket: str,
                                                              tmp_path: Path) -> None:
    with pytest.raises(ServerGone):  # never started
        tmux.panes("s")
    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    assert tmux.panes("not-this-one") == {}

    subprocess.run(["tmux", "-L", socket, "kill-server"], check=True, timeout=15)

    with pytest.raises(ServerGone) as caught:
        tmux.panes("s")
    assert "is gone" in caught.value.message and "handoff resume" in caught.value.hint
    assert tmux.has_session("s") is False


def test_a_server_killed_by_sigkill_is_gone_though_its_socket_stays(
        tmux: Tmux, socket: str, tmp_path: Path) -> None:
    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    os.kill(server_pid(tmux), signal.SIGKILL)

    def gone() -> bool:
        try:
            tmux.panes("s")
        except ServerGone:
            return True
        return False

    wait_until(gone, what="the killed server to stop answering")
    assert socket_file(socket).exists(), "a killed server cannot remove its socket"
    assert tmux.has_session("s") is False


def test_a_stopped_server_is_a_failure_never_a_gone_session(
        tmux: Tmux, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tmux.new_session("s", "main", [PY, "-c", BLOCK], tmp_path)
    pid = server_pid(tmux)
    monkeypatch.setenv(TIMEOUT_VARIABLE, "1")  # as a person would shorten it
    os.kill(pid, signal.SIGSTOP)
    try:
        for look in (lambda: tmux.panes("s"), lambda: tmux.has_session("s"),
                     lambda: tmux.capture("%0")):
            with pytest.raises(TmuxFailure) as caught:
                look()
            assert not isinstance(caught.value, ServerGone)
            assert "did not answer within 1s" in caught.value.message
    finally:
        os.kill(pid, signal.SIGCONT)
    assert set(tmux.panes("s")) == {"main"}, "the server lives on after it was woken"


def test_any_other_tmux_error_is_a_failure(tmux: Tmux, monkeypatch: pytest.MonkeyPatch,
                                           short_tmpdir: Path) -> None:
    # tmux refuses a socket folder others may write to
    unsafe = short_tmpdir / f"tmux-{os.getuid()}"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    monkeypatch.setenv("TMUX_TMPDIR", str(short_tmpdir))

    for look in (lambda: tmux.panes("s"), lambda: tmux.has_session("s")):
        with pytest.raises(TmuxFailure, match="unsafe permissions") as caught:
            look()
        assert not isinstance(caught.value, ServerGone)

"""`handoff doctor`, `handoff providers` and `handoff init`'s choice of providers, run as a
user runs them, against the real CLIs where they are installed for the tests."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from handoff.config import load
from handoff.loop.watching import watched_folders
from handoff.record.slots import Slot
from handoff.record.ticket import TicketDir
from tests.harness import handoff, with_inotify_watches
from tests.realcli import configure, role
from tests.standins import install
from tests.standins.homes import claude_home, codex_home


def lines(text: str, level: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(level)]


def warnings(text: str) -> list[str]:
    """doctor's warnings about the set-up; in a latest-versions run (tests/standins/install.py)
    a release newer than the proven range is expected to warn, and a team whose reviewers all
    run on the implementer's CLI is said (a choice, not a broken set-up): neither is what these
    tests look at."""
    return [w for w in lines(text, "WARN") if not (install.LATEST and " version: " in w)
            and not w.startswith("WARN  team: ")]


def test_a_team_reviewing_on_the_implementers_cli_is_said_to_be_not_independent(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("claude", "codex"):
        fake_cli(bin_dir, name)
    configure(handoff_home, {"implementer": role("claude", bin_dir / "claude"),
                             "reviewer": role("claude", bin_dir / "claude")})
    [team] = [w for w in lines(handoff("doctor", cwd=repo).stdout, "WARN") if "team:" in w]
    assert team == ("WARN  team: implementer (implementer, claude), reviewer (reviewer, claude): "
                    "every reviewer runs on claude, the implementer's CLI, so the review is not "
                    "independent")
    (repo / ".handoff.yaml").write_text(
        f"roles:\n  security: {{provider: codex, binary: {bin_dir / 'codex'}, "
        "focus: security}\n")
    said = handoff("doctor", cwd=repo).stdout
    assert not [w for w in lines(said, "WARN") if "team:" in w]
    assert "OK    team: implementer (implementer, claude), reviewer (reviewer, claude), " \
        "security (reviewer, codex)" in said


def test_doctor_with_the_defaults_is_all_ok(repo: Path) -> None:
    done = handoff("doctor", cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    for what in ("tmux", "git", "state dir", "file watching", "config", "implementer: scripted",
                 "reviewer: scripted"):
        assert any(what in line for line in lines(done.stdout, "OK")), what
    assert lines(done.stdout, "FAIL") == []


def test_doctor_says_the_queues_limit_where_it_comes_from_and_who_holds_a_slot(
        repo: Path, handoff_home: Path) -> None:
    [line] = [x for x in lines(handoff("doctor", cwd=repo).stdout, "OK") if "queue:" in x]
    assert f"for {os.cpu_count()} core(s)" in line and "now 0 at work, 0 waiting" in line
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("max_parallel: 1\n")
    busy = Slot(handoff_home, handoff_home / "repo-1" / "A", "1", 1)
    waiting = Slot(handoff_home, handoff_home / "repo-1" / "B", "2", 1)
    assert busy.take() is None and waiting.take() is not None
    try:
        [line] = [x for x in lines(handoff("doctor", cwd=repo).stdout, "OK") if "queue:" in x]
        assert line == ("OK    queue: 1 ticket at work at once (max_parallel in your config); "
                        "now 1 at work, 1 waiting")
    finally:
        busy.release()
        waiting.release()
    (repo / ".handoff.yaml").write_text("max_parallel: 8\n")
    refused = handoff("doctor", cwd=repo).stdout
    assert "'max_parallel' is this machine's, not a repository's" in refused


def test_doctor_warns_when_an_orchestrator_could_not_watch_its_folders(repo: Path) -> None:
    """One inotify watch fewer than an orchestrator's folders: it would poll, so doctor warns
    (and only a warning: tickets still run); with enough of them it does not."""
    needed = len(watched_folders(TicketDir(repo / "T-1")))
    argv = [sys.executable, "-m", "handoff", "doctor"]
    short = subprocess.run(with_inotify_watches(needed - 1, argv), cwd=repo, capture_output=True,
                           text=True, timeout=60)
    assert short.returncode == 0, short.stdout + short.stderr
    [warned] = [line for line in lines(short.stdout, "WARN") if "file watching" in line]
    assert "fs.inotify.max_user_watches" in warned
    assert "sysctl fs.inotify.max_user_watches=" in short.stdout, "the fix is named"
    enough = subprocess.run(with_inotify_watches(needed, argv), cwd=repo, capture_output=True,
                            text=True, timeout=60)
    assert any("file watching: inotify" in line for line in lines(enough.stdout, "OK")), \
        enough.stdout


def test_doctor_names_a_missing_cli_with_how_to_install_it(repo: Path,
                                                           handoff_home: Path) -> None:
    configure(handoff_home, {"implementer": {"provider": "claude",
                                             "binary": "/nonexistent/claude"}})
    done = handoff("doctor", cwd=repo)
    assert done.returncode == 1
    failed = lines(done.stdout, "FAIL")
    assert any("implementer: claude" in f and "/nonexistent/claude" in f for f in failed)
    assert "npm install -g @anthropic-ai/claude-code" in done.stdout


def test_doctor_reads_claude_codes_set_up_and_never_writes_it(
        repo: Path, handoff_home: Path, isolated: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    claude = install.binary("claude")
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude, answer=["trust"])})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-api03-doctor-0123456789abcdefghij")
    monkeypatch.setenv("IS_SANDBOX", "1")
    home = Path(isolated["HOME"])

    fresh = handoff("doctor", cwd=repo)
    assert fresh.returncode == 1
    assert any("claude set-up" in f for f in lines(fresh.stdout, "FAIL"))
    assert not (home / ".claude.json").exists(), "doctor never writes the user's files"

    claude_home(home, [])
    done = handoff("doctor", cwd=repo)
    assert done.returncode == 0, done.stdout
    assert f"version {install.expected_version('claude')}" in done.stdout, "the real binary answered"
    assert not any("flags" in f for f in lines(done.stdout, "FAIL")), "its flags are known"
    warned = lines(done.stdout, "WARN")
    assert any("implementer: claude trust" in w and "not a trusted folder" in w for w in warned)
    assert any("claude API key" in w and "not yet approved" in w for w in warned)
    assert any("reviewer: claude trust" in line and "handoff answers" in line
               for line in lines(done.stdout, "OK"))
    before = (home / ".claude.json").read_text()

    claude_home(home, [repo], api_key=os.environ["ANTHROPIC_API_KEY"])
    trusted = handoff("doctor", cwd=repo)
    assert warnings(trusted.stdout) == [], trusted.stdout
    assert (home / ".claude.json").read_text() != before


def test_doctor_as_root_without_is_sandbox_fails_claude_in_bypass_mode(
        repo: Path, handoff_home: Path, isolated: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    claude = install.binary("claude")
    claude_home(Path(isolated["HOME"]), [repo])
    roles = {"implementer": role("claude", claude),
             "reviewer": role("claude", claude, permission_mode="acceptEdits")}
    configure(handoff_home, roles, sandbox="off")
    monkeypatch.delenv("IS_SANDBOX", raising=False)
    done = handoff("doctor", cwd=repo)
    root = [f for f in lines(done.stdout, "FAIL") if "as root" in f]
    if os.getuid() == 0:
        assert done.returncode == 1 and len(root) == 1, done.stdout
        assert root[0].startswith("FAIL  implementer:"), "acceptEdits needs no sandbox"
        assert "export IS_SANDBOX=1" in done.stdout
    else:
        assert root == []
    # in handoff's own sandbox Claude Code is told it is in one: root needs nothing more
    configure(handoff_home, roles, sandbox="on")
    fenced = handoff("doctor", cwd=repo)
    assert [f for f in lines(fenced.stdout, "FAIL") if "as root" in f] == [], fenced.stdout


def test_doctor_reads_codexs_login_and_trust(repo: Path, handoff_home: Path,
                                             tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    codex = install.binary("codex")
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": {"provider": "scripted"}})
    home = tmp_path / "codex-home"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    signed_out = handoff("doctor", cwd=repo)
    assert signed_out.returncode == 1
    assert any("codex login" in f for f in lines(signed_out.stdout, "FAIL"))
    assert "codex login --with-api-key" in signed_out.stdout
    assert f"version {install.expected_version('codex')}" in signed_out.stdout
    assert not any("flags" in f for f in lines(signed_out.stdout, "FAIL")), "codex took them"

    codex_home(home, "http://127.0.0.1:9/v1", [])
    no_key = handoff("doctor", cwd=repo)
    assert any("reads its key from OPENAI_API_KEY" in f for f in lines(no_key.stdout, "FAIL"))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-standin")
    untrusted = handoff("doctor", cwd=repo)
    assert untrusted.returncode == 0, untrusted.stdout
    assert any("codex trust" in w for w in lines(untrusted.stdout, "WARN"))
    codex_home(home, "http://127.0.0.1:9/v1", [repo])
    assert warnings(handoff("doctor", cwd=repo).stdout) == []


def test_doctor_reports_a_broken_config_instead_of_failing(repo: Path) -> None:
    (repo / ".handoff.yaml").write_text("roles:\n  implementer: {provider: nope}\n")
    done = handoff("doctor", cwd=repo)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert any("config" in f and "unknown provider 'nope'" in f
               for f in lines(done.stdout, "FAIL"))


def test_doctor_outside_a_repo_checks_what_it_can(tmp_path: Path) -> None:
    done = handoff("doctor", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    assert "repo checks skipped" in done.stdout


def test_providers_lists_every_provider_and_what_is_installed(
        repo: Path, handoff_home: Path) -> None:
    claude = install.binary("claude")
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": {"provider": "scripted"}})
    rows = json.loads(handoff("providers", "--json", cwd=repo).stdout)
    by_name = {row["provider"]: row for row in rows}
    assert set(by_name) == {"claude", "codex", "gemini", "opencode", "command", "scripted"}
    assert by_name["claude"]["installed"]
    assert by_name["claude"]["version"] == install.expected_version("claude")
    assert by_name["claude"]["path"] == str(claude) and by_name["claude"]["roles"] == \
        ["implementer"]
    assert by_name["scripted"]["roles"] == ["reviewer"]
    assert {n for n, r in by_name.items() if r["signals"].startswith("hooks")} == \
        {"claude", "codex", "gemini", "opencode", "scripted"}, "the CLIs whose hooks handoff wires"
    assert by_name["command"]["installed"] is False
    assert all(row["support"] for row in rows)
    table = handoff("providers", cwd=repo).stdout
    assert "claude" in table and install.expected_version("claude") in table
    assert "not installed" in table


def fake_cli(folder: Path, name: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{name} 9.9.9'\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def handoff_home_of(repo: Path) -> Path:
    """A home with no config of its own: only the repository's file counts."""
    return repo.parent / "no-home"


def only_git_and_tmux(tmp_path: Path) -> Path:
    """A PATH holding git and tmux and nothing else a machine may have installed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "tmux"):
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    return bin_dir


def test_init_picks_the_installed_clis_and_says_so(repo: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = only_git_and_tmux(tmp_path)
    for name in ("codex", "gemini"):
        fake_cli(bin_dir, name)
    monkeypatch.setenv("PATH", str(bin_dir))
    done = handoff("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "found on PATH: codex, gemini" in done.stdout
    assert "chose: implementer codex, reviewer gemini, security reviewer gemini (a second CLI" \
        in done.stdout
    text = (repo / ".handoff.yaml").read_text()
    assert "provider: codex" in text and "provider: gemini" in text
    # the file it wrote is a team: a security reviewer on the second CLI, beside the reviewer
    team = load(handoff_home_of(repo), repo)
    assert team.team.reviewers == ("reviewer", "security")
    assert (team.roles["security"].provider, team.roles["security"].focus) == ("gemini", "security")


def test_init_with_one_cli_names_no_security_reviewer_and_says_why(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = only_git_and_tmux(tmp_path)
    fake_cli(bin_dir, "claude")
    monkeypatch.setenv("PATH", str(bin_dir))
    done = handoff("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "chose: implementer claude, reviewer claude; no security reviewer: it needs a second " \
        "installed CLI" in done.stdout
    assert "security:" not in (repo / ".handoff.yaml").read_text().split("# tester")[0]


def test_init_without_any_cli_falls_back_to_the_scripted_agent(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(only_git_and_tmux(tmp_path)))
    done = handoff("init", cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "chose: implementer scripted, reviewer scripted" in done.stdout
    assert "install a CLI" in done.stdout


def test_a_cli_outside_its_proven_range_is_a_warning_naming_the_range(
        repo: Path, handoff_home: Path, tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    (old / "claude").write_text("#!/bin/sh\necho '2.1.100 (Claude Code)'\n")
    (old / "claude").chmod(0o755)
    configure(handoff_home, {"implementer": role("claude", old / "claude")})
    done = handoff("doctor", cwd=repo)
    [warned] = [w for w in lines(done.stdout, "WARN") if "implementer: claude version" in w]
    assert "2.1.100 is outside the range handoff is proven against (2.1.197 to 2.1.332)" in warned
    assert "npm install -g @anthropic-ai/claude-code@2.1.332" in done.stdout
    rows = {r["provider"]: r for r in json.loads(handoff("providers", "--json", cwd=repo).stdout)}
    assert rows["claude"]["proven"] == "2.1.197 to 2.1.332"
    assert "2.1.100" in str(rows["claude"]["unproven"])
    assert rows["scripted"]["proven"] is None and rows["scripted"]["unproven"] is None


def test_doctor_names_claudes_back_end_and_what_it_lacks(
        repo: Path, handoff_home: Path, isolated: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    claude = install.binary("claude")
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude, backend="anthropic")})
    monkeypatch.setenv("IS_SANDBOX", "1")
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "t")
    monkeypatch.setenv("CLAUDE_CODE_USE_BEDROCK", "true")
    monkeypatch.setenv("AWS_PROFILE", "work")
    done = handoff("doctor", cwd=repo)
    assert done.returncode == 1
    [failed] = [f for f in lines(done.stdout, "FAIL") if "claude back-end" in f]
    assert failed.startswith("FAIL  implementer:") and "AWS_REGION or AWS_DEFAULT_REGION" in failed
    assert "CLAUDE_CODE_USE_BEDROCK=true in the environment" in failed and "AWS_PROFILE" in failed
    assert "export AWS_REGION=" in done.stdout
    [chosen] = [o for o in lines(done.stdout, "OK") if "reviewer: claude back-end" in o]
    assert "back-end anthropic (roles.<role>.backend: anthropic)" in chosen
    assert "ANTHROPIC_AUTH_TOKEN" in chosen and "AWS_PROFILE" not in chosen
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert handoff("doctor", cwd=repo).returncode == 0
    rows = {r["provider"]: r for r in json.loads(handoff("providers", "--json", cwd=repo).stdout)}
    assert "back-end bedrock" in str(rows["claude"]["reaches"])


def test_inits_file_leaves_the_users_settings_in_force_and_doctor_says_where_each_comes_from(
        repo: Path, handoff_home: Path) -> None:
    """`handoff init` writes every default commented out: a `stall_timeout: 12` of the user's
    own config.yaml still holds, and doctor names the file of every setting not the default."""
    handoff_home.mkdir(parents=True, exist_ok=True)
    (handoff_home / "config.yaml").write_text("stall_timeout: 12\nmax_rounds: 5\n")
    made = handoff("init", cwd=repo)
    assert made.returncode == 0, made.stderr
    assert "git add .handoff.yaml && git commit" in made.stdout, "init says to commit it"
    (repo / ".handoff.yaml").write_text((repo / ".handoff.yaml").read_text()
                                        .replace("# max_rounds: 3", "max_rounds: 2"))
    done = handoff("doctor", cwd=repo)
    ok = lines(done.stdout, "OK")
    assert any(f"config: valid: {handoff_home / 'config.yaml'}, {repo / '.handoff.yaml'}" in o
               for o in ok), done.stdout
    assert any(f"config stall_timeout: 12.0 (from {handoff_home / 'config.yaml'})" in o
               for o in ok), done.stdout
    assert any(f"config max_rounds: 2 (from {repo / '.handoff.yaml'})" in o for o in ok)


def test_a_program_the_sandbox_would_hide_is_said_by_doctor_and_refused_by_start(
        repo: Path, tmp_path: Path, handoff_home: Path) -> None:
    """A scanner whose program, and a `command` peer whose script, sit under /tmp (the test's
    own folder), off PATH: inside the fence a private /tmp covers them, so the gate or the
    peer would not find them. doctor names each with the mend, start refuses before a round is
    spent, and sandbox.write mends it."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("scan", "agent.sh"):
        (tools / name).write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
        (tools / name).chmod(0o755)
    config = {"scanners": [{"name": "mine", "command": [str(tools / "scan")]}],
              "roles": {"implementer": {"provider": "command",
                                        "command": ["sh", str(tools / "agent.sh"),
                                                    "{message}"]}}}
    (repo / ".handoff.yaml").write_text(json.dumps(config), encoding="utf-8")
    done = handoff("doctor", cwd=repo)
    failed = lines(done.stdout, "FAIL")
    assert done.returncode == 1
    assert any(line.startswith("FAIL  scanner mine:") and
               f"{tools / 'scan'} is under /tmp, which the sandbox replaces" in line
               for line in failed), failed
    assert any(line.startswith("FAIL  implementer: command:") and "under /tmp" in line
               for line in failed), failed
    assert "add its folder to sandbox.write" in done.stdout
    plan = tmp_path / "plan.md"
    plan.write_text("# Fix add\n", encoding="utf-8")
    refused = handoff("start", "T-1", "--plan", str(plan), "--yes", cwd=repo)
    assert refused.returncode == 6 and "which the sandbox replaces" in refused.stderr
    handoff_home.mkdir(parents=True, exist_ok=True)  # a hole is the person's own to open
    (handoff_home / "config.yaml").write_text(json.dumps({"sandbox": {"write": [str(tools)]}}),
                                              encoding="utf-8")
    mended = handoff("doctor", cwd=repo)
    assert not [line for line in lines(mended.stdout, "FAIL") if "sandbox" in line], \
        mended.stdout

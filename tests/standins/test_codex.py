"""The real Codex CLI in a tmux pane, driven offline by the stand-in Responses API server.

Proves tests/standins/openai.py (with brain.py) makes Codex carry out a handoff brief: read
it, edit, commit, write the report and file it with the brief's submit command; and, as a
reviewer, run the test commands and file a failing verdict. Each test gets its own tmux
server; at the end no process that carries the test's CODEX_HOME may survive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from handoff.protocol.frontmatter import split
from tests.conftest import git, unittest_argv, wait_until
from tests.harness import FIX_ADD, plan_text, write_plan
from tests.standins.brain import Say
from tests.standins.homes import codex_argv, codex_binary, codex_command, codex_env, codex_home
from tests.standins.openai import OpenAIStandIn

TMUX = shutil.which("tmux") or "tmux"
BUDGET = 120.0  # seconds for a whole turn: Codex starts in ~2 s, each step is a local command


@pytest.fixture
def codex_cli() -> Path:
    """The pinned codex (installed into the user cache on first use, or HANDOFF_TEST_CODEX)."""
    return codex_binary()


class Pane:
    """One codex pane on a private tmux server (never the user's default socket)."""

    def __init__(self, socket: str, codex_home: Path) -> None:
        self.socket = socket
        self.codex_home = codex_home
        self.pane = ""

    def tmux(self, *args: str) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True,
                              timeout=15, check=True).stdout

    def start(self, command: list[str], cwd: Path) -> None:
        self.pane = self.tmux("-f", "/dev/null", "new-session", "-d", "-P", "-F", "#{pane_id}",
                              "-x", "200", "-y", "50", "-c", str(cwd), "--", *command).strip()

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.pane)

    def codex_pids(self) -> list[int]:
        """Live processes started for this test's Codex (they all carry its CODEX_HOME)."""
        marker = f"CODEX_HOME={self.codex_home}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if marker not in (entry / "environ").read_bytes().split(b"\0"):
                    continue
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue  # gone meanwhile, or not ours to read
            if state != "Z":
                pids.append(int(entry.name))
        return pids

    def kill(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True, timeout=15)
        tmpdir = Path(os.environ.get("TMUX_TMPDIR", "/tmp"))
        (tmpdir / f"tmux-{os.getuid()}" / self.socket).unlink(missing_ok=True)


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    # a socket of our own: the autouse `isolated` socket belongs to handoff under test
    pane = Pane(f"standin-codex-{uuid.uuid4().hex[:10]}", tmp_path / "codex-home")
    yield pane
    pane.kill()
    # SIGHUP from the dying pane ends codex; wait for it rather than assume it
    wait_until(lambda: not pane.codex_pids(), timeout=20,
               what=f"every process with CODEX_HOME={pane.codex_home} to exit")


def brief_file(folder: Path, fields: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"brief-{fields['round']}.md"
    path.write_text(f"---\n{yaml.safe_dump(fields, sort_keys=False, width=1000)}---\n"
                    "# Brief\n\nDo the round of the plan, then file your report.\n", encoding="utf-8")
    return path


def run_codex(pane: Pane, api: OpenAIStandIn, home: Path, repo: Path, brief: Path,
              args: tuple[str, ...] = ()) -> str:
    codex_home(pane.codex_home, api.base_url, [repo])
    prompt = f"Read and follow {brief}"
    pane.start(codex_command(codex_env(home, pane.codex_home),
                             codex_argv(prompt, cwd=repo, args=args)), repo)
    return prompt


def explain(pane: Pane, api: OpenAIStandIn) -> str:
    sent = "\n".join(f"  {r.kind} results={len(r.results)} sent={r.sent[:160]!r}"
                     for r in api.records())
    return f"screen:\n{pane.screen()}\nrequests:\n{sent}"


def wait_for(pane: Pane, api: OpenAIStandIn, check: Any, what: str) -> Any:
    try:
        return wait_until(check, timeout=BUDGET, what=what, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{explain(pane, api)}") from None


# code mode: the default model's tools (exec + wait); flat: a model Codex has no metadata for
# gets plain exec_command/write_stdin functions (and a non-blocking "⚠ 1 warning")
MODES = {"code": ((), {"exec", "wait"}), "flat": (("-m", "gpt-5.1-codex"), {"exec_command", "write_stdin"})}


def tools_used(api: OpenAIStandIn) -> set[str]:
    return {r.via for r in api.turn_records()} - {"message"}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_implementer_edits_commits_and_files_report(tmp_path: Path, repo: Path, pane: Pane,
                                                     isolated: dict[str, str], codex_cli: Path,
                                                     mode: str) -> None:
    args, tools = MODES[mode]
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}))
    draft, filed = tmp_path / "drafts" / "report-1.md", tmp_path / "filed" / "report-1.md"
    filed.parent.mkdir()
    brief = brief_file(tmp_path / "briefs", {
        "ticket": "T-1", "role": "implementer", "round": 1, "worktree": str(repo),
        "plan": str(plan), "report": str(draft), "submit": ["cp", str(draft), str(filed)]})
    base = git(repo, "rev-parse", "HEAD")
    with OpenAIStandIn() as api:
        prompt = run_codex(pane, api, Path(isolated["HOME"]), repo, brief, args)
        wait_for(pane, api, lambda: filed.exists() and git(repo, "rev-parse", "HEAD") != base,
                 "the commit and the filed report")
        # the turn ends with the brain's last word: Codex shows it and is ready again
        wait_for(pane, api, lambda: "I filed my report." in pane.screen(), "the turn's final message")
        assert pane.codex_pids(), "the survivor check at teardown must see Codex while it runs"
    head = git(repo, "rev-parse", "HEAD")
    assert git(repo, "log", "-1", "--format=%s") == "T-1: round 1"
    assert "return a + b" in git(repo, "show", "HEAD:calc.py")
    assert git(repo, "status", "--porcelain") == "", "Codex left the worktree dirty"
    report, _ = split(filed.read_text(encoding="utf-8"))
    assert report == {"status": "done", "commit": head}
    assert api.prompts() == [prompt], "the brief must start exactly one turn"
    assert api.user_messages() == [prompt]
    assert [r for r in api.records() if r.kind == "title"], "Codex asks for a thread title"
    assert tools_used(api) == tools - {"wait", "write_stdin"}, "every step is quick: no polls"
    sent = [r.sent for r in api.turn_records()]
    assert any(s.startswith(f"cat -- {brief};") for s in sent), "the brief was read"
    assert any("git add -A && git commit" in s for s in sent)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_reviewer_runs_failing_tests_and_files_fail_verdict(tmp_path: Path, repo: Path, pane: Pane,
                                                            isolated: dict[str, str], codex_cli: Path,
                                                            mode: str) -> None:
    args, tools = MODES[mode]
    plan = write_plan(tmp_path, plan_text({1: {"edits": [FIX_ADD]}}))
    draft, filed = tmp_path / "drafts" / "review-1.md", tmp_path / "filed" / "review-1.md"
    filed.parent.mkdir()
    commit = git(repo, "rev-parse", "HEAD")
    slow = ["sh", "-c", "sleep 3; echo slow check passed"]  # outlives a 1 s yield: polled
    brief = brief_file(tmp_path / "briefs", {
        "ticket": "T-1", "role": "reviewer", "round": 1, "worktree": str(repo), "commit": commit,
        "plan": str(plan), "report": str(draft), "submit": ["cp", str(draft), str(filed)],
        "tests": [slow, unittest_argv("tests.test_calc")]})
    with OpenAIStandIn(yield_ms=1000) as api:
        run_codex(pane, api, Path(isolated["HOME"]), repo, brief, args)
        wait_for(pane, api, filed.exists, "the filed review")
        wait_for(pane, api, lambda: "I filed my report." in pane.screen(), "the turn's final message")
    report, _ = split(filed.read_text(encoding="utf-8"))
    assert report["verdict"] == "fail"
    assert report["commit"] == commit
    must = report["must_fix"]
    assert isinstance(must, list) and len(must) == 1, report
    assert "tests.test_calc" in must[0]["reason"]
    assert must[0]["file"] == "tests/test_calc.py"
    # the brain saw each command's own output, Codex's status lines stripped
    results = [r for r in api.turn_records() if isinstance(r.action, Say)][-1].results
    assert results[1].startswith("slow check passed") and "handoff-exit=0" in results[1]
    assert "handoff-exit=1" in results[2]
    assert tools_used(api) == tools, "the slow command was polled"
    assert git(repo, "status", "--porcelain") == ""

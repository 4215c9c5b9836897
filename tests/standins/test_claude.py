"""The Anthropic stand-in drives the real Claude Code: a brief in, a commit and a filed report out.

Real tmux on a private socket, the real `claude` binary, a real HTTP server on 127.0.0.1.
The binary comes from HANDOFF_TEST_CLAUDE or the test cache; a missing binary is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import git, wait_until
from tests.standins.anthropic import AnthropicStandIn, turn_of
from tests.standins.brain import Edit, Read, Say, Shell, Write
from tests.standins.homes import claude_argv, claude_binary, claude_command, claude_env, claude_home

PLAN = """\
# Plan

Make add() add.

```handoff-script
round: 1
edits:
  - file: calc.py
    replace: "return a - b"
    with: "return a + b"
```
"""


def _tmux(socket: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True,
                          timeout=15, check=True).stdout


def _screen(socket: str) -> str:
    try:
        return _tmux(socket, "capture-pane", "-p", "-J", "-t", "%0").rstrip()
    except subprocess.CalledProcessError as exc:
        return f"(no screen: {exc.stderr.strip()})"


def _gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _brief(tmp_path: Path, repo: Path) -> tuple[Path, Path]:
    """A round-1 implementer brief (outside the repo, so the worktree stays clean)."""
    plan = tmp_path / "plan.md"
    plan.write_text(PLAN, encoding="utf-8")
    draft, filed = tmp_path / "report-draft.md", tmp_path / "filed" / "report.md"
    filed.parent.mkdir()
    fields = {"ticket": "T-1", "role": "implementer", "round": 1, "worktree": str(repo),
              "plan": str(plan), "report": str(draft), "submit": ["cp", str(draft), str(filed)]}
    brief = tmp_path / "brief-1.md"
    brief.write_text(f"---\n{json.dumps(fields)}\n---\nImplement round 1 of the plan.\n",
                     encoding="utf-8")
    return brief, filed


def test_real_claude_code_follows_a_brief_against_the_standin(tmp_path: Path, repo: Path,
                                                               isolated: dict[str, str]) -> None:
    binary = claude_binary()  # installed on first use; a failure to install fails the test
    home = Path(isolated["HOME"])  # holds the tests' .gitconfig, so the agent's commit works
    claude_home(home, trusted=[repo])
    brief, filed = _brief(tmp_path, repo)
    prompt = f"Read and follow {brief}"
    socket = f"standin-claude-{uuid.uuid4().hex[:10]}"

    with AnthropicStandIn() as api:
        argv = claude_command(claude_env(home, api.base_url), claude_argv(prompt, binary=binary))
        _tmux(socket, "-f", "/dev/null", "new-session", "-d", "-x", "200", "-y", "50",
              "-c", str(repo), *argv)
        pid = int(_tmux(socket, "display-message", "-p", "-t", "%0", "#{pane_pid}"))
        try:
            try:
                wait_until(lambda: filed.exists() and git(repo, "log", "-1", "--format=%s")
                           == "T-1: round 1", timeout=120, what="the commit and the filed report",
                           interval=0.2)
                # the turn ends with the brain's last word: no request may follow it
                wait_until(lambda: any(isinstance(a, Say) for a in api.actions()), timeout=30,
                           what="the end of the turn", interval=0.2)
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n--- screen ---\n{_screen(socket)}\n--- stand-in "
                                     f"errors ---\n{api.errors}") from None
            api.check()
            assert api.turn_prompts() == [prompt]  # delivered exactly once
            assert [type(a) for a in api.actions()] == [Read, Read, Edit, Shell, Write, Shell, Say]
            assert all(e.prompt == prompt for e in api.main_loop())
            head = git(repo, "rev-parse", "HEAD")
            assert "return a + b" in git(repo, "show", "HEAD:calc.py")
            assert git(repo, "status", "--porcelain") == ""
            report = filed.read_text(encoding="utf-8")
            assert f"commit: '{head}'" in report and "status: done" in report
        finally:
            subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=15)
            (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / socket).unlink(
                missing_ok=True)  # kill-server leaves the socket file behind
        wait_until(lambda: _gone(pid), timeout=20, what=f"claude (pid {pid}) to exit")


# -- the server on its own: real HTTP, no CLI ---------------------------------------------


def _post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(f"{url}/v1/messages?beta=true", json.dumps(body).encode(),
                                     {"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return str(response.headers["content-type"]), bytes(response.read())


def _events(payload: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[len("data: "):]) for line in payload.decode().splitlines()
            if line.startswith("data: ")]


def _tools(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "input_schema": {"type": "object"}} for n in names]


def test_tool_names_follow_the_request_and_a_missing_tool_is_an_error(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    with AnthropicStandIn(mind=lambda prompt, results: Read(str(target))) as api:
        _, payload = _post(api.base_url, {"model": "m", "stream": True, "tools": _tools("bash", "read"),
                                          "messages": [{"role": "user", "content": "go"}]})
        events = _events(payload)
        assert [e["type"] for e in events] == [
            "message_start", "content_block_start", "content_block_delta", "content_block_stop",
            "message_delta", "message_stop"]
        assert events[1]["content_block"]["name"] == "read"  # the request's spelling
        assert json.loads(events[2]["delta"]["partial_json"]) == {"file_path": str(target)}
        assert events[4]["delta"]["stop_reason"] == "tool_use"
        assert api.errors == []

        _, payload = _post(api.base_url, {"model": "m", "tools": _tools("Bash", "ReadFile"),
                                          "messages": [{"role": "user", "content": "go"}]})
        answer = json.loads(payload)
        assert answer["stop_reason"] == "end_turn"
        assert "no tool named 'Read'" in answer["content"][0]["text"]
        assert len(api.errors) == 1
        with pytest.raises(AssertionError, match="no tool named 'Read'"):
            api.check()


def test_side_requests_get_plain_text_and_other_endpoints_a_harmless_answer() -> None:
    with AnthropicStandIn(mind=lambda prompt, results: Say("never")) as api:
        schema = {"type": "object", "properties": {"title": {"type": "string"}}}
        _, payload = _post(api.base_url, {
            "model": "m", "tools": [], "stream": False,
            "output_config": {"format": {"type": "json_schema", "schema": schema}},
            "messages": [{"role": "user", "content": "<session>\nhi\n</session>"}]})
        assert json.loads(json.loads(payload)["content"][0]["text"]) == {"title": "Stand-in session"}
        request = urllib.request.Request(f"{api.base_url}/v1/messages/count_tokens", b"{}",
                                         {"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert json.loads(response.read()) == {"input_tokens": 10}
        assert [e.main_loop for e in api.log()] == [False, False]
        assert api.turn_prompts() == []


def test_the_prompt_is_the_newest_typed_text_and_results_follow_it() -> None:
    reminder = "<system-reminder>\n# gitStatus\nCurrent branch: main\n</system-reminder>"
    paste = ('\n\n<pasted_content id="6911">\nRead and follow /x/brief-2.md\n'
             '</pasted_content id="6911">\n')
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": reminder},
                                     {"type": "text", "text": "Read and follow /x/brief-1.md"}]},
        {"role": "system", "content": "# Environment\nnot the user's"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "one"},
                                     {"type": "text", "text": reminder}]},
    ]
    assert turn_of(messages) == ("Read and follow /x/brief-1.md", ["one"])
    # sent while busy: injected after the next tool result, which still belongs to brief 1
    messages[-1]["content"].append({"type": "text", "text": (
        "The user sent a new message while you were working:\nRead and follow /x/brief-3.md\n\n"
        "This is how Claude Code surfaces messages the user sends mid-turn — within the running "
        "turn. Address the message above as you continue this turn.")})
    assert turn_of(messages) == ("Read and follow /x/brief-3.md", [])
    messages += [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
                 {"role": "user", "content": [{"type": "text", "text": paste}]},
                 {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Bash",
                                                    "input": {}}]},
                 {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2",
                                               "content": [{"type": "text", "text": "two"}]}]}]
    assert turn_of(messages) == ("Read and follow /x/brief-2.md", ["two"])

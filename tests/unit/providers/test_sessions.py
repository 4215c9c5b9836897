"""The coding CLIs' own session files, found and read by their providers (claude, codex) through
handoff.providers.sessions, for what each session spent, whatever a peer may have written there.

The session files here are shaped as the real CLIs write them: Claude Code 2.1.328 (assistant
entries with `message.usage`, one per content block; a `cost-state` entry) and Codex 0.171
(`session_meta` first, `token_count` events with `info.total_token_usage`), as both wrote
them against the stand-in servers.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from handoff.providers import claude, codex, sessions
from handoff.record.usage import MAX_COUNT, Usage

SESSION = "fd9c23c6-2f75-4fbb-a050-b217a8b9e253"


# ---- session files shaped as the CLIs write them ------------------------------------------

def claude_assistant(message_id: str, usage_: dict[str, Any], block: dict[str, Any],
                     cwd: str = "/w") -> dict[str, Any]:
    return {"parentUuid": "b67ec15d", "isSidechain": False, "type": "assistant",
            "message": {"id": message_id, "type": "message", "role": "assistant",
                        "model": "claude-opus-5-5", "content": [block],
                        "stop_reason": "tool_use", "stop_sequence": None,
                        "usage": {**usage_, "output_tokens_details": {"thinking_tokens": 0},
                                  "server_tool_use": {"web_search_requests": 0},
                                  "service_tier": "standard",
                                  "cache_creation": {"ephemeral_1h_input_tokens": 0,
                                                     "ephemeral_5m_input_tokens": 0}}},
            "requestId": f"req_{message_id}", "uuid": f"uuid-{message_id}-{block['type']}",
            "timestamp": "2026-11-29T22:56:09.246Z", "cwd": cwd, "sessionId": SESSION,
            "version": "2.1.328"}


def tokens(i: int, o: int, write: int = 0, read: int = 0) -> dict[str, int]:
    return {"input_tokens": i, "cache_creation_input_tokens": write,
            "cache_read_input_tokens": read, "output_tokens": o}


def claude_lines(cost: float | None = 0.0123, unknown: bool = False) -> list[dict[str, Any]]:
    text = {"type": "text", "text": "Reading the brief."}
    tool = {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}
    lines: list[dict[str, Any]] = [
        {"type": "mode", "mode": "normal", "sessionId": SESSION},
        {"type": "user", "message": {"role": "user", "content": "Read and follow /b/brief-1.md"},
         "uuid": "u1", "sessionId": SESSION},
        # one message, two content blocks: written twice with the same usage
        claude_assistant("msg_1", tokens(10, 48, write=2000, read=0), text),
        claude_assistant("msg_1", tokens(10, 48, write=2000, read=0), tool),
        {"type": "user", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "usage: a word"}]},
         "uuid": "u2", "sessionId": SESSION},
        claude_assistant("msg_2", tokens(3, 100, write=50, read=2000), tool),
        {"type": "api-request-blob", "sessionId": SESSION, "hash": "h",
         "message": {"text": "x" * 5000}},
    ]
    if cost is not None:
        lines.append({"type": "cost-state", "sessionId": SESSION, "totalCostUSD": cost,
                      "totalAPIDuration": 122, "modelUsage": {"claude-opus-5-5": {
                          "inputTokens": 13, "outputTokens": 148, "costUSD": cost}},
                      "hasUnknownModelCost": unknown})
    return lines


def codex_lines(cwd: str, totals: list[dict[str, int] | None]) -> list[dict[str, Any]]:
    lines: list[dict[str, Any]] = [
        {"timestamp": "2026-11-30T03:20:26.454Z", "ordinal": 0, "type": "session_meta",
         "payload": {"session_id": "01a22a77", "id": "01a22a77", "cwd": cwd,
                     "originator": "codex_cli_rs", "cli_version": "0.171.0",
                     "base_instructions": {"text": "You are Codex. " * 1500}}},
        {"timestamp": "2026-11-30T03:20:26.500Z", "type": "event_msg",
         "payload": {"type": "task_started"}},
    ]
    for total in totals:
        info = None if total is None else {
            "total_token_usage": total, "last_token_usage": total,
            "last_usage_includes_reasoning": True, "model_context_window": 475000}
        lines.append({"timestamp": "2026-11-30T03:20:26.531Z", "type": "event_msg",
                      "payload": {"type": "token_count", "info": info,
                                  "rate_limits": {"limit_id": "codex", "primary": None}}})
    return lines


def codex_total(i: int, cached: int, o: int) -> dict[str, int]:
    return {"input_tokens": i, "cached_input_tokens": cached, "cache_write_input_tokens": 0,
            "output_tokens": o, "reasoning_output_tokens": 0, "total_tokens": i + o}


def write_jsonl(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines),
                    encoding="utf-8")
    return path


# ---- reading one file ---------------------------------------------------------------------

def test_claude_counts_each_message_once_and_takes_its_recorded_cost(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / f"{SESSION}.jsonl", claude_lines())
    assert claude.read_usage(path) == Usage(input_tokens=13, output_tokens=148,
                                            cache_read_tokens=2000, cache_write_tokens=2050,
                                            cost_usd=0.0123)


def test_claude_cost_is_none_when_it_records_none_or_an_unknown_price(tmp_path: Path) -> None:
    none = claude.read_usage(write_jsonl(tmp_path / "a.jsonl", claude_lines(cost=None)))
    assert none is not None and none.cost_usd is None and none.tokens == 4211
    unknown = claude.read_usage(write_jsonl(tmp_path / "b.jsonl", claude_lines(unknown=True)))
    assert unknown is not None and unknown.cost_usd is None and unknown.tokens == 4211


def test_codex_takes_the_last_running_total_and_splits_off_cached_input(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rollout.jsonl", codex_lines("/w", [
        None, codex_total(15529, 0, 7), codex_total(40000, 15000, 300)]))
    assert codex.read_usage(path) == Usage(input_tokens=25000, output_tokens=300,
                                           cache_read_tokens=15000, cost_usd=None)


JUNK: list[bytes] = [
    b"",
    b"not json at all\n" * 100,
    b"\x00\xff\xfe binary \x00 usage token_count cost-state\n",
    b'["usage", "token_count"]\n{"type":"assistant","message":"usage"}\n',
    b'{"type":"assistant","message":{"id":"m","usage":"many"}}\n',
    b'{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":7}}}\n',
    b'{"type":"assistant","message":{"id":"m","usage":{"input_tokens":1e400',  # torn line
]


@pytest.mark.parametrize("content", JUNK)
def test_junk_gives_no_usage_and_no_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "junk.jsonl"
    path.write_bytes(content)
    assert claude.read_usage(path) is None
    assert codex.read_usage(path) is None


def test_counts_of_the_wrong_kind_count_as_nothing(tmp_path: Path) -> None:
    line = claude_assistant("m", {"input_tokens": -5, "output_tokens": True,
                                  "cache_read_input_tokens": "9",
                                  "cache_creation_input_tokens": 10**40}, {"type": "text"})
    cost = {"type": "cost-state", "totalCostUSD": float("nan"), "hasUnknownModelCost": False}
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(cost).replace("NaN", "NaN") + "\n")
    found = claude.read_usage(path)
    assert found == Usage(cache_write_tokens=MAX_COUNT, cost_usd=None)


def test_missing_huge_fifo_and_folder_give_no_usage_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert claude.read_usage(tmp_path / "missing.jsonl") is None
    huge = tmp_path / "huge.jsonl"
    write_jsonl(huge, claude_lines())
    with huge.open("r+b") as handle:  # sparse: past the limit without using the disk
        handle.truncate(sessions.FILE_LIMIT + 1)
    assert claude.read_usage(huge) is None
    whole_lines = write_jsonl(tmp_path / "lines.jsonl", claude_lines() * 3)
    assert claude.read_usage(whole_lines) is not None
    monkeypatch.setattr(sessions, "FILE_LIMIT", whole_lines.stat().st_size - 1)
    assert claude.read_usage(whole_lines) is None, "one byte over the limit, in good lines"
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert claude.read_usage(fifo) is None and codex.read_usage(fifo) is None
    assert time.monotonic() - started < 5, "a FIFO planted as a session file never blocks"
    (tmp_path / "dir.jsonl").mkdir()
    assert codex.read_usage(tmp_path / "dir.jsonl") is None
    link = tmp_path / "link.jsonl"
    link.symlink_to("/dev/zero")
    assert claude.read_usage(link) is None
    planted = tmp_path / "planted.jsonl"
    planted.symlink_to(write_jsonl(tmp_path / "elsewhere" / "s.jsonl", claude_lines()))
    assert claude.read_usage(planted) is None, "a session file is the CLI's own, not a link"


def test_an_overlong_line_is_passed_over_whole_and_the_rest_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "LINE_LIMIT", 1000)
    lines = claude_lines(cost=None)
    blob = json.dumps(claude_assistant("msg_big", tokens(10**6, 10**6), {
        "type": "text", "text": "y" * 5000}))
    # the end of an overlong line is never read as a line of its own
    tail = json.dumps(claude_assistant("msg_tail", tokens(10**6, 0), {"type": "text"}))
    path = tmp_path / "long.jsonl"
    path.write_text(blob + "\n" + "z" * 1001 + tail + "\n" +
                    "".join(json.dumps(x) + "\n" for x in lines))
    found = claude.read_usage(path)
    assert found is not None and found.tokens == 4211, "the long lines were skipped whole"


# ---- finding a role's sessions ------------------------------------------------------------

def test_claude_sessions_are_the_worktrees_files_written_since_launch(tmp_path: Path) -> None:
    home, worktree = tmp_path / "h", tmp_path / "repo" / ".worktrees" / "T-1.implementer"
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
    old = write_jsonl(folder / "old.jsonl", claude_lines())
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    new = write_jsonl(folder / f"{SESSION}.jsonl", claude_lines())
    write_jsonl(home / ".claude" / "projects" / "-elsewhere" / "x.jsonl", claude_lines())
    (folder / "memory").mkdir()
    assert claude.sessions_in(worktree, time.time() - 60, {"HOME": str(home)}) == [new]


def test_codex_sessions_are_the_rollouts_that_ran_in_the_worktree(tmp_path: Path) -> None:
    home, worktree = tmp_path / "codex-home", tmp_path / "wt"
    day = time.strftime("%Y/%m/%d")
    folder = home / "sessions" / day
    ours = write_jsonl(folder / "rollout-2026-11-30T03-20-26-a.jsonl",
                       codex_lines(str(worktree), [codex_total(10, 0, 1)]))
    write_jsonl(folder / "rollout-2026-11-30T03-20-27-b.jsonl",
                codex_lines(str(tmp_path / "other"), [codex_total(10, 0, 1)]))
    old = write_jsonl(folder / "rollout-2026-11-30T01-00-00-c.jsonl",
                      codex_lines(str(worktree), [codex_total(10, 0, 1)]))
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    (folder / "rollout-2026-11-30T03-20-28-d.jsonl").write_bytes(b"\x00" * 100)
    (folder / "rollout-2026-11-30T03-20-29-e.jsonl").write_text("x" * (sessions.HEAD_LIMIT + 10))
    found = codex.sessions_in(worktree, time.time() - 60, {"CODEX_HOME": str(home)})
    assert found == [ours]
    assert codex.sessions_in(worktree, time.time() - 60,
                             {"CODEX_HOME": str(tmp_path / "none")}) == []


def test_a_link_as_a_folder_on_the_way_is_not_followed(tmp_path: Path) -> None:
    """The state folder is the peer's to write: the O_NOFOLLOW of the file alone still went
    through a link made of the project's folder (another ticket's sessions, anything)."""
    home, worktree = tmp_path / "h", tmp_path / "wt"
    elsewhere = write_jsonl(tmp_path / "elsewhere" / f"{SESSION}.jsonl", claude_lines())
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
    folder.parent.mkdir(parents=True)
    folder.symlink_to(elsewhere.parent)
    assert claude.sessions_in(worktree, time.time() - 60, {"HOME": str(home)}) == []
    assert claude.read_usage(folder / elsewhere.name) is None
    assert claude.read_usage(elsewhere) is not None, "the same file, reached plainly, is read"
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    ours = write_jsonl(tmp_path / "days" / time.strftime("%Y/%m/%d") / "rollout-a.jsonl",
                       codex_lines(str(worktree), [codex_total(10, 0, 1)]))
    (codex_home / "sessions").symlink_to(tmp_path / "days")
    assert codex.sessions_in(worktree, time.time() - 60, {"CODEX_HOME": str(codex_home)}) == []
    assert codex.read_usage(codex_home / "sessions" / ours.relative_to(tmp_path / "days")) \
        is None
    assert codex.read_usage(ours) is not None

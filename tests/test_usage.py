"""handoff.loop.usage: tokens (and cost) per peer per round, read from the coding CLIs' own session
files; shown by `status`, `log` and the final report; a `budget` stops the ticket for a person.

The session files here are shaped as the real CLIs write them: Claude Code 2.1.328 (assistant
entries with `message.usage`, one per content block; a `cost-state` entry) and Codex 0.171
(`session_meta` first, `token_count` events with `info.total_token_usage`), as both wrote
them against the stand-in servers. The end-to-end test runs the real `claude` against the
stand-in Anthropic server, which reports token usage in its responses.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest

from handoff import config as config_mod
from handoff.errors import UsageError
from handoff.loop import usage
from handoff.loop.summary import WORD_LIMIT, final_report, words
from handoff.loop.usage import Usage
from handoff.operations.render import describe
from tests.harness import (
    ADD_ONLY,
    FIX_ADD,
    events,
    handoff,
    plan_text,
    spawn,
    state,
    ticket_path,
    wait_phase,
    write_plan,
)
from tests.realcli import configure, role, stand_in_errors, trust_codex
from tests.standins.anthropic import AnthropicStandIn
from tests.standins.homes import claude_home
from tests.standins.openai import OpenAIStandIn

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
    assert usage.read_claude(path) == Usage(input_tokens=13, output_tokens=148,
                                            cache_read_tokens=2000, cache_write_tokens=2050,
                                            cost_usd=0.0123)


def test_claude_cost_is_none_when_it_records_none_or_an_unknown_price(tmp_path: Path) -> None:
    none = usage.read_claude(write_jsonl(tmp_path / "a.jsonl", claude_lines(cost=None)))
    assert none is not None and none.cost_usd is None and none.tokens == 4211
    unknown = usage.read_claude(write_jsonl(tmp_path / "b.jsonl", claude_lines(unknown=True)))
    assert unknown is not None and unknown.cost_usd is None and unknown.tokens == 4211


def test_codex_takes_the_last_running_total_and_splits_off_cached_input(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "rollout.jsonl", codex_lines("/w", [
        None, codex_total(15529, 0, 7), codex_total(40000, 15000, 300)]))
    assert usage.read_codex(path) == Usage(input_tokens=25000, output_tokens=300,
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
    assert usage.read_claude(path) is None
    assert usage.read_codex(path) is None


def test_counts_of_the_wrong_kind_count_as_nothing(tmp_path: Path) -> None:
    line = claude_assistant("m", {"input_tokens": -5, "output_tokens": True,
                                  "cache_read_input_tokens": "9",
                                  "cache_creation_input_tokens": 10**40}, {"type": "text"})
    cost = {"type": "cost-state", "totalCostUSD": float("nan"), "hasUnknownModelCost": False}
    path = tmp_path / "odd.jsonl"
    path.write_text(json.dumps(line) + "\n" + json.dumps(cost).replace("NaN", "NaN") + "\n")
    found = usage.read_claude(path)
    assert found == Usage(cache_write_tokens=usage.MAX_COUNT, cost_usd=None)


def test_missing_huge_fifo_and_folder_give_no_usage_without_blocking(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert usage.read_claude(tmp_path / "missing.jsonl") is None
    huge = tmp_path / "huge.jsonl"
    write_jsonl(huge, claude_lines())
    with huge.open("r+b") as handle:  # sparse: past the limit without using the disk
        handle.truncate(usage.FILE_LIMIT + 1)
    assert usage.read_claude(huge) is None
    whole_lines = write_jsonl(tmp_path / "lines.jsonl", claude_lines() * 3)
    assert usage.read_claude(whole_lines) is not None
    monkeypatch.setattr(usage, "FILE_LIMIT", whole_lines.stat().st_size - 1)
    assert usage.read_claude(whole_lines) is None, "one byte over the limit, in good lines"
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert usage.read_claude(fifo) is None and usage.read_codex(fifo) is None
    assert time.monotonic() - started < 5, "a FIFO planted as a session file never blocks"
    (tmp_path / "dir.jsonl").mkdir()
    assert usage.read_codex(tmp_path / "dir.jsonl") is None
    link = tmp_path / "link.jsonl"
    link.symlink_to("/dev/zero")
    assert usage.read_claude(link) is None
    planted = tmp_path / "planted.jsonl"
    planted.symlink_to(write_jsonl(tmp_path / "elsewhere" / "s.jsonl", claude_lines()))
    assert usage.read_claude(planted) is None, "a session file is the CLI's own, not a link"


def test_an_overlong_line_is_passed_over_whole_and_the_rest_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "LINE_LIMIT", 1000)
    lines = claude_lines(cost=None)
    blob = json.dumps(claude_assistant("msg_big", tokens(10**6, 10**6), {
        "type": "text", "text": "y" * 5000}))
    # the end of an overlong line is never read as a line of its own
    tail = json.dumps(claude_assistant("msg_tail", tokens(10**6, 0), {"type": "text"}))
    path = tmp_path / "long.jsonl"
    path.write_text(blob + "\n" + "z" * 1001 + tail + "\n" +
                    "".join(json.dumps(x) + "\n" for x in lines))
    found = usage.read_claude(path)
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
    assert usage.claude_sessions(worktree, time.time() - 60, {"HOME": str(home)}) == [new]


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
    (folder / "rollout-2026-11-30T03-20-29-e.jsonl").write_text("x" * (usage.HEAD_LIMIT + 10))
    found = usage.codex_sessions(worktree, time.time() - 60, {"CODEX_HOME": str(home)})
    assert found == [ours]
    assert usage.codex_sessions(worktree, time.time() - 60,
                                {"CODEX_HOME": str(tmp_path / "none")}) == []


# ---- a round's usage and the ticket's totals ----------------------------------------------

def launch_event(role_: str, when: float) -> dict[str, Any]:
    from datetime import UTC, datetime

    return {"time": datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds"),
            "kind": "launch", "round": 1, "role": role_}


def test_each_round_counts_only_what_its_sessions_spent_since_the_last(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, worktree = tmp_path / "h", tmp_path / "wt"
    env = {"HOME": str(home)}
    folder = home / ".claude" / "projects" / re.sub(r"[^A-Za-z0-9]", "-", str(worktree))
    log: list[dict[str, Any]] = [launch_event("implementer", time.time() - 10)]
    assert usage.measure("claude", "implementer", worktree, log, env) is None, "no file yet"

    lines = claude_lines(cost=0.01)
    session = write_jsonl(folder / f"{SESSION}.jsonl", [*lines[:4], lines[-1]])  # round 1
    first = usage.measure("claude", "implementer", worktree, log, env)
    assert first is not None
    assert (first["tokens"], first["cost_usd"], first["source"]) == (2058, 0.01, str(session))
    log.append({"kind": "usage", "round": 1, "role": "implementer", **first})
    assert usage.measure("claude", "implementer", worktree, log, env) is None, \
        "read again (a resumed orchestrator): nothing new is counted twice"

    write_jsonl(session, claude_lines(cost=0.03))  # round 2 in the same live session
    second = usage.measure("claude", "implementer", worktree, log, env)
    assert second is not None
    assert (second["tokens"], second["cost_usd"]) == (4211 - 2058, 0.02)
    assert second["input_tokens"] == 3 and second["cache_read_tokens"] == 2000
    log.append({"kind": "usage", "round": 2, "role": "implementer", **second})

    relaunched = write_jsonl(folder / "second-session.jsonl", claude_lines(cost=None))
    third = usage.measure("claude", "implementer", worktree, log, env)
    assert third is not None and third["tokens"] == 4211 and "cost_usd" not in third
    assert third["source"] == str(relaunched)
    log.append({"kind": "usage", "round": 3, "role": "implementer", **third})
    # Claude Code writes a session's cost when it ends: counted then, its tokens not again
    write_jsonl(relaunched, claude_lines(cost=0.05))
    late = usage.measure("claude", "implementer", worktree, log, env)
    assert late is not None and (late["tokens"], late["cost_usd"]) == (0, 0.05)
    assert usage.measure("claude", "reviewer", worktree, log, env) is None, "never launched"

    read: list[Path] = []
    reader = usage.READERS["claude"]

    def counted(path: Path) -> Usage | None:
        read.append(path)
        return reader.read(path)
    monkeypatch.setitem(usage.READERS, "claude", usage.Reader(reader.sessions, counted))
    log.append({"kind": "usage", "round": 3, "role": "implementer", **late})
    assert usage.measure("claude", "implementer", worktree, log, env) is None
    assert read == [], "a session file unchanged since it was read is not read again"
    assert usage.measure("scripted", "implementer", worktree, log, env) is None


def test_totals_rounds_and_the_budget(tmp_path: Path) -> None:
    log: list[dict[str, Any]] = [
        {"kind": "usage", "round": 1, "role": "reviewer", "input_tokens": 5, "tokens": 5},
        {"kind": "usage", "round": 1, "role": "implementer", "input_tokens": 100,
         "output_tokens": 50, "cost_usd": 0.5},
        {"kind": "usage", "round": 2, "role": "implementer", "output_tokens": 45,
         "cost_usd": 0.25},
    ]
    assert usage.totals([]) is None
    total = usage.totals(log)
    assert total is not None and usage.status_fields(total) == {
        "input_tokens": 105, "output_tokens": 95, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "tokens": 200, "cost_usd": 0.75}
    assert [(n, r, u.tokens) for n, r, u in usage.per_round(log)] == \
        [(1, "implementer", 150), (1, "reviewer", 5), (2, "implementer", 45)]

    assert usage.over_budget(log, None, None) is None
    assert usage.over_budget(log, 200, None) is None, "at the budget is not past it"
    over = usage.over_budget(log, 199, None)
    assert over == {"budget": {"tokens": 199}, "over": "tokens", "total": 200, "limit": 199}
    assert usage.over_budget(log, None, 0.7) == {
        "budget": {"cost_usd": 0.7}, "over": "cost_usd", "total": 0.75, "limit": 0.7}
    asked = [*log, {"kind": "budget", **over}]
    assert usage.over_budget(asked, 199, None) is None, "a person was asked: it goes on"
    assert usage.over_budget(asked, 150, None) is not None, "another budget is watched afresh"


# ---- configuration ------------------------------------------------------------------------

def write_config(repo: Path, text: str) -> None:
    (repo / ".handoff.yaml").write_text(text, encoding="utf-8")


@pytest.mark.parametrize(("text", "expected"), [
    ("budget: {tokens: 2000000}\n", config_mod.Budget(tokens=2000000)),
    ("budget: {cost_usd: 5}\n", config_mod.Budget(cost_usd=5.0)),
    ("budget: {tokens: 10, cost_usd: 0.5}\n", config_mod.Budget(tokens=10, cost_usd=0.5)),
    ("budget: {}\n", None),
    ("budget:\n", None),
])
def test_budget_config(tmp_path: Path, text: str, expected: config_mod.Budget | None) -> None:
    write_config(tmp_path, text)
    assert config_mod.load(tmp_path / "home", tmp_path).budget == expected


@pytest.mark.parametrize(("text", "says"), [
    ("budget: 5\n", "'budget' must be a mapping"),
    ("budget: {token: 5}\n", "budget: unknown key(s) ['token']"),
    ("budget: {tokens: 0}\n", "budget.tokens must be a whole number ≥ 1"),
    ("budget: {tokens: 1.5}\n", "budget.tokens must be a whole number ≥ 1"),
    ("budget: {tokens: true}\n", "budget.tokens must be a whole number ≥ 1"),
    ("budget: {cost_usd: -1}\n", "budget.cost_usd must be a positive number"),
    ("budget: {cost_usd: .nan}\n", "budget.cost_usd must be a positive number"),
    ("budget: {cost_usd: .inf}\n", "budget.cost_usd must be a positive number"),
    ("budget: {cost_usd: five}\n", "budget.cost_usd must be a positive number"),
])
def test_a_bad_budget_is_a_clear_usage_error(tmp_path: Path, text: str, says: str) -> None:
    write_config(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        config_mod.load(tmp_path / "home", tmp_path)
    assert says in caught.value.message and ".handoff.yaml" in caught.value.message
    assert "budget: {tokens: 2000000}" in caught.value.hint


def test_the_init_template_offers_the_budget(tmp_path: Path) -> None:
    text = config_mod.TEMPLATE.format(implementer="claude", reviewer="claude")
    line = next(x for x in text.splitlines() if "budget:" in x)
    write_config(tmp_path, line.lstrip("# ") + "\n")
    assert config_mod.load(tmp_path / "home", tmp_path).budget == \
        config_mod.Budget(tokens=2000000, cost_usd=5.0)


# ---- showing it ---------------------------------------------------------------------------

def test_log_renders_usage_and_budget_events() -> None:
    line = describe({"time": "2026-11-30T03:20:26.531+00:00", "kind": "usage", "round": 2,
                     "role": "reviewer", "input_tokens": 1000, "output_tokens": 20,
                     "cache_read_tokens": 30000, "cache_write_tokens": 5, "tokens": 31025,
                     "cost_usd": 0.0421, "source": "/h/.claude/projects/-wt/abc.jsonl"})
    assert line == ("03:20:26  r2  reviewer used 31,025 tokens (in 1,000, out 20, cache read "
                    "30,000, cache write 5), $0.04 — -wt/abc.jsonl")
    stop = describe({"time": "2026-11-30T03:20:27.000+00:00", "kind": "budget", "round": 1,
                     "over": "tokens", "total": 2100000, "limit": 2000000})
    assert stop.endswith("over budget: 2,100,000 tokens used, the budget is 2,000,000")


def summary(**more: Any) -> str:
    args: dict[str, Any] = {"ticket": "P-7", "outcome": "passed", "reason": "",
                            "branch": "handoff/P-7", "commit": "9fceb02d0ae598e95dc9",
                            "rounds": 2, "reviews": 2, "bounces": 0,
                            "changed": [("calc.py", 2, 2)], "verified": ["gate pass"],
                            "open_findings": [], **more}
    return final_report(**args)


def test_the_final_report_has_a_table_per_round_and_role() -> None:
    rows = [(1, "implementer", Usage(1000, 200, cost_usd=0.5)), (1, "reviewer", Usage(300, 40)),
            (2, "implementer", Usage(10, 2, 5000, 7, cost_usd=0.25))]
    text = summary(usage=rows)
    assert "**Usage:** 6,559 tokens, $0.75 as the CLIs recorded it" in text
    assert "| Round | Role | Tokens | Cost |" in text
    assert "| 1 | implementer | 1,200 | $0.50 |" in text
    assert "| 1 | reviewer | 340 | - |" in text
    assert "| 2 | implementer | 5,019 | $0.25 |" in text
    assert words(text) <= WORD_LIMIT
    plain = summary(usage=[(1, "implementer", Usage(10, 2))])
    assert "| Round | Role | Tokens |\n" in plain and "Cost" not in plain and "$" not in plain
    assert "Usage" not in summary(), "no usage recorded: nothing said"


def test_a_long_table_gives_way_to_its_total_within_the_word_limit() -> None:
    rows = [(n, r, Usage(n * 1000, 10)) for n in range(1, 16) for r in ("implementer", "reviewer")]
    changed = [(f"src/f{i}.py", 1, 1) for i in range(6)]
    text = summary(usage=rows, changed=changed)
    assert words(text) <= WORD_LIMIT
    assert "| Round |" not in text and "**Usage:** 240,300 tokens" in text
    assert "src/f5.py (+1 −1)" in text, "the table goes before any other detail"


def test_the_usage_object_in_docs_matches_status() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "cli.md").read_text(encoding="utf-8")
    start = docs.index("### The `usage` object")
    section = docs[start:docs.index("\n### ", start + 1)]
    documented = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", section, re.M))
    fields = usage.status_fields(Usage(1, 2, 3, 4, 0.5))
    assert set(documented) == set(fields)
    kinds = {int: "integer", float: "number", bool: "boolean"}
    for key, value in fields.items():
        assert kinds[type(value)] in documented[key], (key, documented[key])
    assert "| `usage` | object or null |" in docs


# ---- a whole ticket with the real Claude Code -----------------------------------------------

def test_claude_usage_is_recorded_shown_and_its_budget_stops_the_ticket_once(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str],
        claude: Path, anthropic: AnthropicStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    configure(handoff_home, {"implementer": role("claude", claude),
                             "reviewer": role("claude", claude)}, budget={"tokens": 1})
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    runner = spawn("start", "CU-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, log=tmp_path / "orch.log")
    try:
        waiting = wait_phase(handoff_home, "CU-1", "needs-human", "passed", "escalated",
                             timeout=150)
        assert waiting["phase"] == "needs-human", (tmp_path / "orch.log").read_text() + \
            stand_in_errors(anthropic)
        log = events(handoff_home, "CU-1")
        spent = [e for e in log if e["kind"] == "usage"]
        assert [(e["round"], e["role"]) for e in spent] == [(1, "implementer")]
        first = spent[0]
        assert first["tokens"] > 1 and first["output_tokens"] > 0 and first["input_tokens"] > 0
        assert first["provider"] == "claude" and first["source"].endswith(".jsonl")
        assert "/.claude/projects/" in first["source"] and Path(first["source"]).is_file()
        assert f"over budget: the peers used {first['tokens']:,} tokens" in waiting["reason"]
        assert waiting["after_answer"] == "gating"

        shown = handoff("status", "CU-1", "--json", cwd=repo)
        row = json.loads(shown.stdout)[0]
        assert row["usage"]["tokens"] == first["tokens"] and row["phase"] == "needs-human"
        text = handoff("status", "CU-1", cwd=repo).stdout
        assert f"usage: {first['tokens']:,} tokens (in " in text
        logged = handoff("log", "CU-1", cwd=repo).stdout
        assert f"implementer used {first['tokens']:,} tokens" in logged
        assert "over budget:" in logged

        assert handoff("answer", "CU-1", "go on", cwd=repo).returncode == 0
        assert runner.wait(timeout=180) == 0, (tmp_path / "orch.log").read_text()
    finally:
        runner.kill()
        runner.wait()
    final = state(handoff_home, "CU-1")
    assert final["phase"] == "passed", final["reason"]
    log = events(handoff_home, "CU-1")
    spent = [e for e in log if e["kind"] == "usage"]
    assert [(e["round"], e["role"]) for e in spent] == [(1, "implementer"), (1, "reviewer")]
    assert len([e for e in log if e["kind"] == "budget"]) == 1, "asked once for one budget"
    assert not [e for e in anthropic.main_loop() if "A person answered" in (e.prompt or "")], \
        "the answer to a budget stop at the gate carries the ticket on; no peer is told it"
    report = (ticket_path(handoff_home, "CU-1") / "final-report.md").read_text()
    total = sum(e["tokens"] for e in spent)
    assert f"**Usage:** {total:,} tokens" in report
    assert f"| 1 | implementer | {spent[0]['tokens']:,} |" in report
    assert f"| 1 | reviewer | {spent[1]['tokens']:,} |" in report
    closed = handoff("close", "CU-1", cwd=repo)
    assert closed.returncode == 0, closed.stderr


def test_codex_usage_is_read_from_its_rollout_in_the_implementers_worktree(
        repo: Path, tmp_path: Path, handoff_home: Path, isolated: dict[str, str], claude: Path,
        codex: Path, anthropic: AnthropicStandIn, openai: OpenAIStandIn) -> None:
    claude_home(Path(isolated["HOME"]), [repo])
    trust_codex(openai, repo)
    configure(handoff_home, {"implementer": role("codex", codex),
                             "reviewer": role("claude", claude)})
    plan = plan_text({1: {"edits": [FIX_ADD]}}, test=ADD_ONLY, review=[ADD_ONLY])
    done = handoff("start", "CXU-1", "--plan", str(write_plan(tmp_path, plan)), "--yes",
                   "--foreground", cwd=repo, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr + stand_in_errors(anthropic)
    spent = {e["role"]: e for e in events(handoff_home, "CXU-1") if e["kind"] == "usage"}
    assert set(spent) == {"implementer", "reviewer"}
    codex_usage = spent["implementer"]
    assert codex_usage["provider"] == "codex" and "cost_usd" not in codex_usage
    sessions = Path(os.environ["CODEX_HOME"]) / "sessions"
    assert Path(codex_usage["source"]).is_relative_to(sessions)
    assert Path(codex_usage["source"]).name.startswith("rollout-")
    assert codex_usage["input_tokens"] > 0 and codex_usage["output_tokens"] > 0
    assert spent["reviewer"]["provider"] == "claude"
    row = json.loads(handoff("status", "CXU-1", "--json", cwd=repo).stdout)[0]
    assert row["usage"]["tokens"] == codex_usage["tokens"] + spent["reviewer"]["tokens"]
    assert handoff("close", "CXU-1", cwd=repo).returncode == 0

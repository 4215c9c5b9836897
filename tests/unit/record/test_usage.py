"""What the peers spent: a round's usage measured from the CLIs' session files
(handoff.loop.metering), the ticket's totals and budget (handoff.record.usage), shown by
`status`, `log` and the final report; a `budget` stops the ticket for a person. The session
files themselves: tests/unit/providers/test_sessions.py. The end-to-end tests run the real `claude` and
`codex` against the stand-in servers, which report token usage in their responses.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from handoff import config as config_mod
from handoff.errors import UsageError
from handoff.loop.summary import WORD_LIMIT, final_report, words
from handoff.operations.render import event_line
from handoff.record import usage
from handoff.record.usage import Usage
from tests.paths import ROOT

# ---- the ticket's totals and its budget -----------------------------------------------------

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
    text = config_mod.TEMPLATE.format(implementer="claude", reviewer="claude", security="")
    line = next(x for x in text.splitlines() if "budget:" in x)
    write_config(tmp_path, line.lstrip("# ") + "\n")
    assert config_mod.load(tmp_path / "home", tmp_path).budget == \
        config_mod.Budget(tokens=2000000, cost_usd=5.0)


# ---- showing it ---------------------------------------------------------------------------

def test_log_renders_usage_and_budget_events() -> None:
    line = event_line({"time": "2026-11-30T03:20:26.531+00:00", "kind": "usage", "round": 2,
                     "role": "reviewer", "input_tokens": 1000, "output_tokens": 20,
                     "cache_read_tokens": 30000, "cache_write_tokens": 5, "tokens": 31025,
                     "cost_usd": 0.0421, "source": "/h/.claude/projects/-wt/abc.jsonl"})
    assert line == ("03:20:26  r2  reviewer used 31,025 tokens (in 1,000, out 20, cache read "
                    "30,000, cache write 5), $0.04 — -wt/abc.jsonl")
    stop = event_line({"time": "2026-11-30T03:20:27.000+00:00", "kind": "budget", "round": 1,
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
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = docs.index("### The `usage` object")
    section = docs[start:docs.index("\n### ", start + 1)]
    documented = dict(re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", section, re.M))
    fields = usage.status_fields(Usage(1, 2, 3, 4, 0.5))
    assert set(documented) == set(fields)
    kinds = {int: "integer", float: "number", bool: "boolean"}
    for key, value in fields.items():
        assert kinds[type(value)] in documented[key], (key, documented[key])
    assert "| `usage` | object or null |" in docs

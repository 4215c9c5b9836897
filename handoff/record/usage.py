"""What the peers spent, as the ticket's record keeps it: the `Usage` of a session, round or
ticket, the totals over the `usage` events (for status, the final report and the budget), and
their text.

Counts come from files a peer could have written: every number is believed only when it is a
plain non-negative integer (or finite cost) below MAX_COUNT; junk counts as nothing.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

#: no count read from a file is believed above this (junk must not make totals absurd)
MAX_COUNT = 10**13

COUNTS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")


@dataclass(frozen=True)
class Usage:
    """Tokens of one session, round or ticket. input_tokens: input read at full price (cache
    reads and writes apart); tokens: all of them together, what a `budget: {tokens}` counts."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: dollars as the CLI itself computed them; None when it records no cost
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_read_tokens + \
            self.cache_write_tokens

    def plus(self, other: Usage) -> Usage:
        cost = None if self.cost_usd is None and other.cost_usd is None else \
            (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return of_counts((getattr(self, k) + getattr(other, k) for k in COUNTS), cost)

    def since(self, before: Usage | None) -> Usage:
        """What was spent after before (an earlier reading of the same session)."""
        if before is None:
            return self
        cost = None if self.cost_usd is None else \
            max(self.cost_usd - (before.cost_usd or 0.0), 0.0)
        return of_counts((max(getattr(self, k) - getattr(before, k), 0) for k in COUNTS), cost)

    def fields(self) -> dict[str, int | float]:
        """For an event: the counts, their sum, and cost_usd only when the CLI recorded one."""
        out: dict[str, int | float] = {k: getattr(self, k) for k in COUNTS}
        out["tokens"] = self.tokens
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 6)
        return out

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Usage:
        """From an event's fields (or a session's), whatever junk they hold."""
        return of_counts((count_of(data.get(k)) for k in COUNTS), cost_of(data.get("cost_usd")))


def of_counts(counts: Iterable[int], cost: float | None) -> Usage:
    """A Usage from its counts in the order of COUNTS."""
    values = dict(zip(COUNTS, counts, strict=True))
    return Usage(input_tokens=values["input_tokens"], output_tokens=values["output_tokens"],
                 cache_read_tokens=values["cache_read_tokens"],
                 cache_write_tokens=values["cache_write_tokens"], cost_usd=cost)


def count_of(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, MAX_COUNT)


def cost_of(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0 or value > MAX_COUNT:
        return None
    return float(value)



# ---- totals for status, the final report and the budget -----------------------------------

def usage_events(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [e for e in events if e.get("kind") == "usage"]


def totals(events: Iterable[Mapping[str, Any]]) -> Usage | None:
    """The ticket's total over its usage events; None when none was recorded. Its cost is
    what the CLIs recorded so far (None: none did)."""
    found = usage_events(events)
    if not found:
        return None
    total = Usage()
    for event in found:
        total = total.plus(Usage.of(event))
    return total


class UsageFields(TypedDict):
    """The `usage` object of `handoff status --json` (docs/cli.md), in its order."""

    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    tokens: int
    cost_usd: float | None


def status_fields(total: Usage) -> UsageFields:
    """The `usage` object of `handoff status --json` (docs/cli.md)."""
    return {"input_tokens": total.input_tokens, "output_tokens": total.output_tokens,
            "cache_read_tokens": total.cache_read_tokens,
            "cache_write_tokens": total.cache_write_tokens, "tokens": total.tokens,
            "cost_usd": None if total.cost_usd is None else round(total.cost_usd, 6)}


def per_round(events: Iterable[Mapping[str, Any]],
              roles: Sequence[str] = ("implementer", "reviewer")) -> list[tuple[int, str, Usage]]:
    """(round, role, usage) in order of round, then of the team (roles: in working order)."""
    rows: dict[tuple[int, str], Usage] = {}
    for event in usage_events(events):
        n = event.get("round")
        key = (n if isinstance(n, int) and not isinstance(n, bool) else 0,
               str(event.get("role", "")))
        rows[key] = rows[key].plus(Usage.of(event)) if key in rows else Usage.of(event)
    order = {role: i for i, role in enumerate(roles)}
    return [(n, role, rows[(n, role)])
            for n, role in sorted(rows, key=lambda k: (k[0], order.get(k[1], len(order)), k[1]))]


class OverBudget(TypedDict):
    """The fields of a `budget` event (docs/protocol.md)."""

    #: the budget it passed: tokens and/or cost_usd
    budget: dict[str, int | float]
    #: which of them it passed: "tokens" or "cost_usd"
    over: str
    total: int | float
    limit: int | float


def over_budget(events: Sequence[Mapping[str, Any]], tokens: int | None,
                cost_usd: float | None) -> OverBudget | None:
    """The fields of a `budget` event when the ticket's total is past its budget and no person
    has been asked about this budget yet (an answer carries the ticket on; a raised budget is
    watched afresh); else None."""
    if tokens is None and cost_usd is None:
        return None
    limit: dict[str, int | float] = {
        k: v for k, v in (("tokens", tokens), ("cost_usd", cost_usd)) if v is not None}
    if any(e.get("kind") == "budget" and e.get("budget") == limit for e in events):
        return None
    spent = totals(events)
    if spent is None:
        return None
    if tokens is not None and spent.tokens > tokens:
        return {"budget": limit, "over": "tokens", "total": spent.tokens, "limit": tokens}
    if cost_usd is not None and spent.cost_usd is not None and spent.cost_usd > cost_usd:
        return {"budget": limit, "over": "cost_usd", "total": round(spent.cost_usd, 6),
                "limit": cost_usd}
    return None


def tokens_text(n: int) -> str:
    return f"{n:,}"


def cost_text(cost: float | None) -> str:
    if cost is None:
        return ""
    return f"${cost:.4f}" if cost < 0.01 else f"${cost:.2f}"


def usage_line(fields: UsageFields) -> str:
    """`handoff status`'s line for a ticket's totals (Totals.fields)."""
    text = short(Usage.of(fields))
    if fields.get("cost_usd") is not None:
        text += " recorded by the CLIs so far"
    return text


def short(usage: Usage) -> str:
    """One line: total tokens, how they split, the cost when known."""
    text = (f"{tokens_text(usage.tokens)} tokens (in {tokens_text(usage.input_tokens)}, out "
            f"{tokens_text(usage.output_tokens)}, cache read "
            f"{tokens_text(usage.cache_read_tokens)}, cache write "
            f"{tokens_text(usage.cache_write_tokens)})")
    return text + (f", {cost_text(usage.cost_usd)}" if usage.cost_usd is not None else "")

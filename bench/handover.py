"""The hand-over latency a ticket's own events.jsonl records, for the floor and crowd scenarios:
a report filed (`submitted`: the orchestrator judged what `handoff submit` handed it) to
accepted (`submission`), and accepted to the orchestrator's next event (the next brief on its
way, or the ticket's end). Event times have millisecond resolution."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from bench.figures import Figure, Target

#: accepted -> next action, alone: the loop acts at once; with 20 tickets at once at most
#: twice these (a crowd may slow it, not stall it)
ALONE_P50, ALONE_P95 = 5.0, 20.0


def hand_overs(events: Path) -> tuple[list[float], list[float]]:
    """(filed → accepted, accepted → next event) in ms, for each accepted report."""
    rows = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines() if line]
    stamp = [datetime.fromisoformat(str(row["time"])).timestamp() * 1000 for row in rows]
    filed: dict[str, float] = {}
    taken, onward = [], []
    for i, row in enumerate(rows):
        if row.get("kind") == "submitted":
            filed[str(row.get("report"))] = stamp[i]
        elif row.get("kind") == "submission" and row.get("accepted"):
            report = str(row.get("report"))
            if report in filed:
                taken.append(stamp[i] - filed[report])
            if i + 1 < len(rows):
                onward.append(stamp[i + 1] - stamp[i])
    return taken, onward


def figures(label: str, taken: list[float], onward: list[float], load: float) -> list[Figure]:
    """The two hand-over figures; load scales the targets (1 alone, 2 in a crowd)."""
    return [
        Figure(f"{label}: report filed → accepted", "ms", taken,
               note="events.jsonl `submitted` → `submission` (accepted), 1 ms resolution"),
        Figure(f"{label}: report accepted → next action", "ms", onward,
               targets=(Target("p50", at_most=ALONE_P50 * load),
                        Target("p95", at_most=ALONE_P95 * load)),
               note="events.jsonl `submission` (accepted) → the next event, 1 ms resolution"),
    ]

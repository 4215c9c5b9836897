"""The fault suite's catalogue: every fault test says what it breaks and what handoff does.

`fault(...)` marks a test; `table()` collects the marks of every test module (the fault
cases live in this folder; a few item proofs that are plain unit tests stay beside the module
they test) into the Markdown table of docs/reliability.md, so the document is checked against the suite
(tests/faults/test_catalog.py) and cannot drift. `python -m tests.faults.catalog` rewrites the
table after a fault test was added or changed.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DOC = HERE.parent.parent / "docs" / "reliability.md"
BEGIN, END = "<!-- fault-table:begin -->", "<!-- fault-table:end -->"


def fault(item: str, what: str, outcome: str, kept: str) -> pytest.MarkDecorator:
    """item: the hardening item it proves (e.g. "6.3"), or "" for a general fault case;
    what: the fault; outcome: what handoff does about it; kept: what survives it."""
    return pytest.mark.fault(item=item, what=what, outcome=outcome, kept=kept)


@dataclass(frozen=True)
class Case:
    item: str
    what: str
    outcome: str
    kept: str
    test: str


def cases() -> list[Case]:
    found = []
    tests = HERE.parent
    for path in sorted(tests.rglob("test_*.py")):
        where = path.relative_to(tests)
        module = importlib.import_module(".".join(("tests", *where.with_suffix("").parts)))
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("test_") or function.__module__ != module.__name__:
                continue
            for mark in getattr(function, "pytestmark", []):
                if mark.name == "fault":
                    found.append(Case(test=f"{where.as_posix()}::{name}", **mark.kwargs))
    return sorted(found, key=lambda c: (_order(c.item), c.test))


def _order(item: str) -> tuple[int, ...]:
    return tuple(int(part) for part in item.split(".") if part.isdigit()) or (999,)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table() -> str:
    rows = ["| # | Fault | What handoff does | What is kept | Test |",
            "|---|---|---|---|---|"]
    rows += [f"| {c.item or '-'} | {_cell(c.what)} | {_cell(c.outcome)} | {_cell(c.kept)} | "
             f"`{c.test}` |" for c in cases()]
    return "\n".join(rows)


def documented() -> str:
    """The table as docs/reliability.md has it now."""
    text = DOC.read_text(encoding="utf-8")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def write() -> None:
    text = DOC.read_text(encoding="utf-8")
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    DOC.write_text(f"{head}{BEGIN}\n{table()}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    write()
    sys.stdout.write(f"wrote {len(cases())} fault cases into {DOC}\n")

"""`handoff demo`: the whole loop on a throwaway repo, with the scripted agents, in seconds.

The repo has a small real bug (word_count miscounts) and failing tests. The plan's first
implementer round is incomplete on purpose: the quick gate passes, the reviewer's full test
run fails with a must-fix, round 2 fixes it and passes.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from handoff.errors import HandoffError
from handoff.record.store import atomic_write

if TYPE_CHECKING:
    from handoff.loop.workspace import Workspace
    from handoff.record.ticket import State

#: the temp folder of one demo; it holds the demo's repo and nothing else
PREFIX = "handoff-demo-"
SOCKET = "handoff-demo"
REPO_NAME = "wordcount"

WORDCOUNT = '''\
def word_count(text: str) -> int:
    """How many words text holds."""
    return len(text.split(" "))
'''

TEST_BASIC = '''\
import unittest

from wordcount import word_count


class BasicTest(unittest.TestCase):
    def test_two_words(self) -> None:
        self.assertEqual(word_count("hello world"), 2)

    def test_empty_text_has_no_words(self) -> None:
        self.assertEqual(word_count(""), 0)
'''

TEST_EDGE = '''\
import unittest

from wordcount import word_count


class EdgeTest(unittest.TestCase):
    def test_runs_of_spaces(self) -> None:
        self.assertEqual(word_count("one   two"), 2)

    def test_tabs_and_newlines(self) -> None:
        self.assertEqual(word_count("tab\\tseparated\\nwords"), 3)
'''


def plan_text(python: str) -> str:
    gate = shlex.join([python, "-m", "unittest", "-q", "tests.test_basic"])
    full = shlex.join([python, "-m", "unittest", "discover", "-q", "-s", "tests", "-t", "."])
    return f"""---
test: {gate}
review:
  - {full}
---
# Fix word_count

`word_count` in `wordcount.py` miscounts: empty text gives 1, and runs of spaces, tabs or
newlines count as extra words. Make every test in `tests/` pass without changing the tests.

Round 1 handles empty text; the whitespace cases are left for review to catch.

```handoff-script
round: 1
edits:
  - file: wordcount.py
    replace: 'return len(text.split(" "))'
    with: 'return len(text.split(" ")) if text else 0'
```

```handoff-script
round: 2
edits:
  - file: wordcount.py
    replace: 'return len(text.split(" ")) if text else 0'
    with: 'return len(text.split())'
```
"""


def make_repo(parent: Path) -> Path:
    """A git repo with the bug, its tests, one commit, and its own committer identity."""
    repo = parent / REPO_NAME
    (repo / "tests").mkdir(parents=True)
    atomic_write(repo / "wordcount.py", WORDCOUNT)
    atomic_write(repo / "tests" / "__init__.py", "")
    atomic_write(repo / "tests" / "test_basic.py", TEST_BASIC)
    atomic_write(repo / "tests" / "test_edge.py", TEST_EDGE)
    atomic_write(repo / ".gitignore", "__pycache__/\n")
    for argv in (["init", "-q", "-b", "main"],
                 ["config", "user.name", "handoff demo"],
                 ["config", "user.email", "demo@handoff.invalid"],
                 ["add", "-A"], ["commit", "-q", "-m", "word_count with a bug"]):
        subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True,
                       timeout=60)
    return repo


def demo_socket() -> str:
    """The demo's tmux socket: its own, unless the person named one (HANDOFF_TMUX_SOCKET), so a
    demo never shares a server with real tickets by accident."""
    return os.environ.get("HANDOFF_TMUX_SOCKET") or SOCKET


def new_demo(root: Path | None = None) -> tuple[str, Path, str]:
    """(ticket id, repo, plan text) for a fresh demo."""
    parent = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    ticket = "DEMO-" + datetime.now().strftime("%Y%m%d-%H%M%S")
    return ticket, make_repo(parent), plan_text(sys.executable)


def remove_demo(repo: Path) -> bool:
    """Remove a demo's repo with the temp folder new_demo made for it, once its ticket is
    closed; only a folder that is exactly what new_demo made (True when removed)."""
    parent = repo.parent
    if repo.name != REPO_NAME or not parent.name.startswith(PREFIX) \
            or [p.name for p in parent.iterdir()] != [REPO_NAME]:
        return False
    shutil.rmtree(parent)
    return True


@dataclass(frozen=True)
class DemoRun:
    """How a demo went, for the person who ran it."""

    ticket: str
    repo: Path
    record: Path
    phase: str
    verdicts: str
    seconds: float
    branch: str
    kept: bool
    #: the demo repo was removed with its temp folder
    removed: bool
    notes: tuple[str, ...] = ()

    @property
    def said(self) -> list[str]:
        lines = [f"\ndemo {self.phase} in {self.seconds:.1f}s: {self.verdicts}",
                 f"  record: {self.record}"]
        lines.append("  the demo repo is removed ('handoff demo --keep' keeps it)" if self.removed
                     else f"  branch: {self.branch} in {self.repo}")
        if self.kept:
            lines.append(f"  watch:  handoff attach {self.ticket}\n  finish: handoff close "
                         f"{self.ticket}, then rm -r {self.repo.parent}")
        return lines


def run(home: Path, keep: bool, say: Callable[[str], None],
        show: Callable[[Mapping[str, object]], None]) -> tuple[DemoRun, State, Workspace]:
    """A demo ticket made, approved and run here (show: each event as it happens), then closed
    and its repo removed unless keep."""
    from handoff.loop.orchestrator import Orchestrator
    from handoff.operations.approval import approve
    from handoff.operations.closing import close
    from handoff.operations.create import NewTicket, create

    started = time.monotonic()
    ticket, repo, text = new_demo()
    say(f"demo repo: {repo} (word_count has a bug; its tests fail)")
    try:
        ws = create(home, NewTicket(
            ticket=ticket, repo=repo, plan_text=text, summary="Fix word_count.",
            socket=demo_socket(), now=True)).workspace  # scripted peers: no queue
    except HandoffError:
        remove_demo(repo)  # nothing was started in it
        raise
    approve(ws)
    state = Orchestrator(ws, show).run()
    if not keep:
        close(ws)
    removed = not keep and remove_demo(repo)
    verdicts = ", ".join(f"round {r} {v}" for r, v in sorted(state.verdicts.items()))
    return DemoRun(ticket, repo, ws.tdir.path, state.phase, verdicts,
                   time.monotonic() - started, state.branch, keep, removed), state, ws

"""Programs run under real cgroups by the limits tests (tests/unit/machinery/: test_limits.py,
test_bounded.py, test_limit_mechanism.py), and how one is started in its cgroups.
Each ends by itself, so even a broken limit leaves the machine its processes and memory."""

from __future__ import annotations

import subprocess

from handoff.machinery.bounded import Bounded
from handoff.machinery.limit_mechanism import MEMORY, PIDS, Mechanism, mechanism

MIB = 1 << 20
#: a fork bomb that ends by itself: every process forks two more to a depth of 9 (1023 in all,
#: none of them Python: a few hundred KiB each) and holds for a few seconds. Bounded by its own
#: depth, so even a broken limit leaves the machine its processes.
BOMB = ("b() { if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; sleep 4; }; "
        "b 9 2>/dev/null; wait")
#: allocates 1 MiB at a time, to at most 2 GiB, then says how far it got
HOG = ("import sys\nheld = []\nfor _ in range(2048):\n    try:\n"
       "        held.append(bytearray(1 << 20))\n    except MemoryError:\n"
       "        print('refused at', len(held), 'MiB', flush=True)\n        sys.exit(3)\n"
       "print('got 2 GiB', flush=True)\n")


def cgroups_here() -> Mechanism:
    held = mechanism()
    assert held.holder(PIDS) is not None and held.holder(MEMORY) is not None, (
        f"this machine is meant to be like CI's (root, cgroup v1 writable): {held}")
    return held


def run_in(bounded: Bounded, argv: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([*bounded.argv(), *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)

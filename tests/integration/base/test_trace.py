"""handoff.trace: with HANDOFF_DEBUG=1 every subprocess and event is written down, secrets
taken out; off, nothing is written and `logging` is never loaded."""

from __future__ import annotations

import subprocess
import sys


def test_off_a_peers_short_process_never_loads_logging() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, time\n"
                           "from handoff import trace\n"
                           "trace.to_stderr(); trace.command(['x'], 0, time.monotonic())\n"
                           "trace.event({'e': 1}); print('logging' in sys.modules)"],
                          capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False" and done.stderr == ""

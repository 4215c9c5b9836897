"""handoff's benchmark: each figure handoff measured beside a raw baseline doing the same work,
with the target it is held to and the verdict.

    .venv/bin/python -m bench [SCENARIO...] [--reps N] [--markdown] [--before COMMIT]

The parts: `runner` (the command line), `scenarios/` (one module per scenario, each explaining
its baselines), `figures` (the Figure type, verdicts, the tables), `stats`, `sandbox` (the
temp dir, environment and tmux sockets a scenario runs in), `handover` (latency from a
ticket's event log), `runtime_venv` (the runtime-only venv of the start-up figures), `before` (an earlier
commit installed beside it, and the before/after table of `--before`) and `machine` (what the
run ran on).
"""

"""Hook scripts shipped with handoff, installed into worktrees or CLIs that support hooks."""

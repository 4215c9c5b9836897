"""The parts handoff drives, each call bounded: tmux and the peers' panes, git and the
worktrees, subprocesses and process groups, the reaper, file watching, tool versions, and the
diagnostics log."""

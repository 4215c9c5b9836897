"""handoff: run AI coding CLIs as a small team through tmux, git worktrees and files."""

__version__ = "0.1.0"

"""Which changed paths are control files (handoff.protocol.protected)."""

from __future__ import annotations

from pathlib import Path

from handoff.machinery.repo import Repo
from handoff.protocol.protected import DEFAULT, touched
from tests.conftest import commit_file, git

#: what runs on a person's machine, or in CI, or steers a coding CLI, from wherever it is in
#: the tree (issue 32's cases first, then the variants)
CONTROL_PATHS = [
    ".pre-commit-config.yaml", ".husky/pre-commit", ".github/actions/setup/action.yml",
    ".gitlab-ci.yml", ".envrc", ".vscode/tasks.json", ".devcontainer/devcontainer.json",
    "sub/.claude/settings.json", "pkg/.codex/config.toml", "web/.gemini/settings.json",
    "tools/.opencode/agent/x.md", "svc/.mcp.json", "apps/web/.envrc", "apps/web/.vscode/x.json",
    "tools/lint/action.yml", ".tool-versions", ".npmrc", "web/.yarnrc.yml", "pip.conf",
    ".cargo/config.toml", "CODEOWNERS", ".github/CODEOWNERS", ".env", ".idea/watcherTasks.xml",
    "gradle/wrapper/gradle-wrapper.properties", ".lfsconfig", "rust-toolchain.toml",
]
#: the project's own code and build files, and files that pick nothing that runs
NOT_CONTROL = [
    "src/env.py", "docs/vscode.md", "package.json", "pyproject.toml", "Makefile",
    "tests/conftest.py", ".pypirc", ".python-version", ".nvmrc", "src/claude.py",
    ".github/dependabot.yml", "environment.yml", ".envrc.example", "husky.md",
]


def test_the_defaults_cover_what_runs_on_a_person_s_machine_at_any_depth(repo: Path) -> None:
    """Read from a real commit, as the orchestrator reads it (git's own names for paths)."""
    base = git(repo, "rev-parse", "HEAD")
    for path in [*CONTROL_PATHS, *NOT_CONTROL]:
        commit_file(repo, path, "x\n", f"add {path}")
    changed = Repo.at(repo).changed_paths(base, "HEAD")
    assert touched(changed, DEFAULT) == sorted(CONTROL_PATHS)

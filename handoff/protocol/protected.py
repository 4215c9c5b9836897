"""Control files: what steers handoff, the peers, CI or the tools on a person's machine, which
a ticket may not change unless a person said so.

A commit that rewrites `.handoff.yaml` changes the gate's command and the roles of every later
ticket; one that rewrites `CLAUDE.md` or `.codex/` instructs every later peer; a workflow runs
with the repository's CI secrets; `.envrc`, `.vscode/tasks.json` or a pre-commit hook runs
on the person's machine when they enter the folder, open it or commit, long after any review.
So a ticket's commit that touches one goes to a person, naming the files, unless the plan
lists them under `may_change:` (the person approved that plan) or a person already answered
for them. This holds with the sandbox off too: it reads git's record of the commit, not what
the peer could reach.

What is not here: the project's own code and build files (a Makefile, package.json's
scripts, setup.py, build.rs, conftest.py). They run only when someone builds or tests the
project, which is what the reviewers read and run; the files that decide which tests run
are shown to them as test configuration (handoff.loop.testconfig).

Patterns, as in `protected:` of the config and `may_change:` of a plan:

* `name` (no slash): a file or folder of that name at any depth (`CLAUDE.md`, `.claude`);
* `path/` : everything under that folder from the repository's top (`.github/workflows/`);
* `path` with a slash: that exact file, or everything under it when it is a folder;
* `*`, `?` and `[…]` glob one path segment (`docs/*.md`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase

#: every control file handoff protects, and why: (pattern, reason). A plain name counts at any
#: depth, because the tools read these files in whatever folder they are started in (a
#: nested package's `.claude/settings.json`, `.envrc` or `.vscode/`)
CONTROL: tuple[tuple[str, str], ...] = (
    # handoff and the coding CLIs: what every later ticket and peer is told and runs
    (".handoff.yaml", "handoff's config: the gate's command, the roles, the scanners"),
    (".handoff/", "handoff's role contracts and local config"),
    ("CLAUDE.md", "instructions every later Claude Code session reads"),
    ("CLAUDE.local.md", "instructions every later Claude Code session reads"),
    ("AGENTS.md", "instructions every later Codex (and other agents') session reads"),
    ("GEMINI.md", "instructions every later Gemini CLI session reads"),
    (".claude", "Claude Code's settings: hooks and commands it runs, its permissions"),
    (".codex", "Codex's settings and instructions"),
    (".gemini", "Gemini CLI's settings and instructions"),
    (".opencode", "opencode's settings, agents and plugins"),
    ("opencode.json", "opencode's settings"),
    ("opencode.jsonc", "opencode's settings"),
    (".mcp.json", "the MCP servers a coding CLI starts: programs it runs"),
    (".cursor", "Cursor's rules and MCP servers"),
    (".cursorrules", "instructions Cursor's agent reads"),
    (".windsurfrules", "instructions Windsurf's agent reads"),
    (".github/copilot-instructions.md", "instructions Copilot's agent reads"),
    # CI: runs with the repository's secrets
    (".github/workflows/", "GitHub Actions workflows"),
    (".github/actions/", "local actions the workflows run"),
    ("action.yml", "a local action a workflow may run (`uses: ./path`)"),
    ("action.yaml", "a local action a workflow may run (`uses: ./path`)"),
    (".gitlab-ci.yml", "GitLab CI's pipeline"),
    (".gitlab/", "files GitLab CI's pipeline includes"),
    (".circleci/", "CircleCI's pipeline"),
    ("Jenkinsfile", "Jenkins's pipeline"),
    ("azure-pipelines.yml", "Azure Pipelines' pipeline"),
    (".travis.yml", "Travis CI's pipeline"),
    ("bitbucket-pipelines.yml", "Bitbucket Pipelines' pipeline"),
    (".buildkite/", "Buildkite's pipeline"),
    (".drone.yml", "Drone's pipeline"),
    # the forge: who must approve a change there
    ("CODEOWNERS", "the reviewers a pull request needs"),
    # git: what git itself runs or fetches for whoever checks the repository out
    (".gitattributes", "names filter and diff drivers git runs"),
    (".gitmodules", "where git fetches submodules from"),
    (".lfsconfig", "where git-lfs fetches content from"),
    # run at a commit on the person's machine
    (".pre-commit-config.yaml", "pre-commit fetches and runs these hooks at every commit"),
    (".husky", "husky's git hooks, run at every commit"),
    (".githooks", "the usual `core.hooksPath`: git hooks run at every commit"),
    ("lefthook.yml", "lefthook's git hooks"),
    (".lefthook.yml", "lefthook's git hooks"),
    # run when the person enters the folder or opens it in an editor
    (".envrc", "direnv runs it when the person enters the folder"),
    (".env", "environment the editor's test and debug runs, docker compose and dotenv load "
     "(LD_PRELOAD, NODE_OPTIONS run code)"),
    ("mise.toml", "mise's tools, environment and hooks, applied when entering the folder"),
    (".mise.toml", "mise's tools, environment and hooks, applied when entering the folder"),
    (".tool-versions", "asdf and mise install and run the tool versions it names"),
    (".vscode", "VS Code's tasks (run on opening the folder), settings naming programs, "
     "launch configurations, MCP servers"),
    (".devcontainer", "the container VS Code builds and its post-create commands"),
    (".devcontainer.json", "the container VS Code builds and its post-create commands"),
    (".idea", "JetBrains IDEs' file watchers and run configurations"),
    (".exrc", "Vim runs it from the folder when `exrc` is set"),
    (".nvim.lua", "Neovim runs it from the folder when `exrc` is set"),
    (".dir-locals.el", "Emacs evaluates its `eval` forms in the folder"),
    # package managers and toolchains: code that runs or is fetched on an install or a build,
    # from outside the repository (no reviewer reads it in a diff)
    (".npmrc", "npm's registry, `script-shell`, `node-options`: where packages come from, "
     "what runs every script"),
    (".yarnrc", "yarn 1's `yarn-path`: a program run as yarn itself"),
    (".yarnrc.yml", "yarn's `yarnPath`, plugins and registry"),
    (".yarn/releases/", "the yarn that runs (`yarnPath` points here)"),
    (".yarn/plugins/", "yarn plugins: code run by every yarn command"),
    (".pnpmfile.cjs", "pnpm runs it at every install"),
    ("bunfig.toml", "bun's preload scripts and registry"),
    ("pip.conf", "pip's index (a virtualenv's own config): where packages come from"),
    ("uv.toml", "uv's indexes: where packages come from"),
    ("poetry.toml", "poetry's local settings and repositories"),
    (".cargo", "cargo's config: a runner and rustc wrapper for every build, aliases, "
     "registries"),
    ("rust-toolchain.toml", "the toolchain rustup installs and runs (`path` names any)"),
    ("rust-toolchain", "the toolchain rustup installs and runs"),
    (".mvn", "Maven's wrapper, extensions and JVM options"),
    ("gradle-wrapper.properties", "the Gradle that ./gradlew downloads and runs"),
    ("gradle-wrapper.jar", "the wrapper ./gradlew runs (a binary no reviewer reads)"),
    (".bazelversion", "the Bazel bazelisk downloads and runs (a fork's, if it says so)"),
)

#: what handoff always protects (the config's `protected:` adds to it, never removes)
DEFAULT = tuple(pattern for pattern, _ in CONTROL)


def matches(pattern: str, path: str) -> bool:
    """path (relative, '/'-separated, as git names it) is under pattern."""
    pattern = pattern.strip()
    if pattern.startswith("./"):
        pattern = pattern[2:]
    parts = path.split("/")
    if "/" not in pattern.rstrip("/"):
        name = pattern.rstrip("/")
        # a folder pattern (`.claude/`) at the top; a plain name anywhere
        if pattern.endswith("/"):
            return fnmatchcase(parts[0], name) and len(parts) > 1
        return any(fnmatchcase(part, name) for part in parts)
    want = pattern.strip("/").split("/")
    if len(parts) < len(want):
        return False
    if not all(fnmatchcase(part, w) for part, w in zip(parts, want, strict=False)):
        return False
    return (len(parts) == len(want) and not pattern.endswith("/")) or len(parts) > len(want)


def touched(changed: Iterable[str], protected: Sequence[str],
            allowed: Sequence[str] = ()) -> list[str]:
    """The changed paths a pattern of protected names and none of allowed does, sorted."""
    return sorted({path for path in changed
                   if any(matches(p, path) for p in protected)
                   and not any(matches(a, path) for a in allowed)})

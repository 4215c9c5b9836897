"""Where the configuration comes from and what it says: the files in force (the person's, then
the repository's), loaded over the defaults; each setting that is not a default with the file
it comes from (handoff doctor); and the commented file `handoff init` writes.

Layers, later winning: built-in defaults, `$HANDOFF_HOME/config.yaml` (the user's), and
`<repo>/.handoff.yaml` (the project's). Every error names the file and the key.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import yaml

from handoff.config.keys import apply
from handoff.config.model import Config
from handoff.errors import UsageError
from handoff.inputs import CONFIG_LIMIT, read_text
from handoff.protocol.frontmatter import load_yaml

REPO_CONFIG = ".handoff.yaml"


def _read(path: Path) -> Any:
    text = read_text(path, CONFIG_LIMIT, "the configuration file")
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from None


def files(home: Path, repo: Path | None) -> list[Path]:
    """The configuration files in force, the later winning."""
    found = (home / "config.yaml", repo / REPO_CONFIG if repo else None)
    return [path for path in found if path is not None and path.is_file()]


def set_in(home: Path, repo: Path | None, key: str) -> Path:
    """The file a person changes key in: the last file that sets it (its value in force comes
    from there), else the repository's own (else, with no repository, theirs)."""
    found = [path for path in files(home, repo)
             if isinstance(data := _read(path), dict) and key in data]
    return found[-1] if found else repo / REPO_CONFIG if repo else home / "config.yaml"


def load(home: Path, repo: Path | None) -> Config:
    """Read the user's and the repo's config files (both optional) over the defaults."""
    defaults = Config()
    merged: dict[str, Any] = {f.name: getattr(defaults, f.name) for f in fields(Config)}
    sources = files(home, repo)
    for path in sources:
        apply(merged, _read(path), str(path), personal=path == home / "config.yaml")
    config = Config(**merged)
    try:
        config.team  # noqa: B018 - made once now, so a bad team is said at load, with its files
    except UsageError as exc:
        raise UsageError(f"{' + '.join(map(str, sources)) or 'the defaults'}: roles: "
                         f"{exc.message}", exc.hint) from None
    return config


def settings(home: Path, repo: Path | None) -> list[tuple[str, Any, Path]]:
    """Each setting that is not the default: its key, its value in force and the file it
    comes from (the last file that sets it)."""
    config, defaults = load(home, repo), Config()
    source: dict[str, Path] = {}
    for path in files(home, repo):
        data = _read(path)
        source.update(dict.fromkeys(data if isinstance(data, dict) else {}, path))
    return [(key, getattr(config, key), path) for key, path in source.items()
            if key in {f.name for f in fields(Config)}
            and getattr(config, key) != getattr(defaults, key)]


TEMPLATE = """\
# handoff configuration for this repository: commit it with the code (an untracked file here
# would make `handoff finish` refuse). Every key is optional: the commented lines show the
# defaults; uncomment one to change it here ($HANDOFF_HOME/config.yaml holds your own, and
# this file wins over it; `handoff doctor` says which file each setting comes from).
# max_rounds: 3          # review rounds before escalating
# max_gate_bounces: 3    # failed verification gates before escalating
# max_relaunches: 2      # restarts of a dying peer per round before asking a person
# gate_timeout: 900      # seconds the verification command may take
# test: python -m pytest -q   # the gate of every plan that names no test: of its own
# base_tests: true       # count the tests the plan's command runs at the base, beside round 1
# warm_reviewers: true   # start the reviewers' CLIs while the gate runs, brief them when it passes
# start_timeout: 120     # seconds a new peer may take to show its input line or start work
# stall_timeout: 1800    # seconds a peer may show no progress before a person is asked
# turn_grace: 5          # seconds after a turn ended without a report before a nudge
# unrecognised_timeout: 60  # seconds with no hook signal and an unreadable screen before it is said
# api_patience: 60       # seconds a CLI may retry an unreachable API before a person is asked
# setup_timeout: 900     # seconds each post_create command may take
roles:
  implementer:
    provider: {implementer}
    # model: ""            # the CLI's --model / -m
    # args: []             # extra arguments for the CLI
    # permission_mode: bypass
    # env: []              # extra environment variables this CLI may see
    # answer: []           # start-up screens handoff may answer itself, e.g. [trust]
  reviewer:
    provider: {reviewer}
{security}  # tester:              # optional: adds tests for the plan's acceptance criteria
  #   provider: {implementer}
# scanners: []           # run by the gate after the test command, e.g.
#   - {{name: gitleaks, command: [gitleaks, detect, --no-git, --source, .]}}
#   - {{name: bandit, command: [bandit, -q, "{{changed_py_files}}"], required: false}}
# share: []              # e.g. [{{path: .venv, mode: symlink}}, {{path: node_modules, mode: copy}}]
# post_create: []        # argv lists run in each new worktree, e.g. [["npm", "ci"]]
# env_allow: []          # extra environment variables every peer may see
# notify: []             # argv told when a ticket needs you or ends (the event as JSON on stdin)
# budget: {{tokens: 2000000, cost_usd: 5}}  # past it the ticket waits for you (either or both)
# ports: 0               # TCP ports each worktree gets: HANDOFF_PORT_1..N, and PORT for the first
# port_range: 20000-29999
"""


SECURITY = """\
  security:              # reviews every round beside the reviewer, for security alone
    provider: {provider}
    kind: reviewer
    focus: security
"""


def config_template(repo_top: Path, implementer: str = "scripted", reviewer: str = "scripted",
                    security: str | None = None) -> Path | None:
    """Write a commented .handoff.yaml into the repo; None when one exists (never overwritten).
    security: the CLI of a security reviewer beside the reviewer (None: none)."""
    path = repo_top / REPO_CONFIG
    if path.exists():
        return None
    path.write_text(TEMPLATE.format(
        implementer=implementer, reviewer=reviewer,
        security=SECURITY.format(provider=security) if security else ""), encoding="utf-8")
    return path

"""Layered YAML configuration → typed objects.

Layers, later winning: built-in defaults, `$HANDOFF_HOME/config.yaml` (the user's), and
`<repo>/.handoff.yaml` (the project's). Every error names the file and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from handoff.errors import UsageError

REPO_CONFIG = ".handoff.yaml"
ROLES = ("implementer", "reviewer")
SHARE_MODES = ("symlink", "copy")


@dataclass(frozen=True)
class Share:
    """A dependency folder of the main checkout made available in each worktree."""

    path: str
    mode: str = "symlink"


@dataclass(frozen=True)
class Config:
    max_rounds: int = 3
    max_gate_bounces: int = 3
    max_relaunches: int = 2
    gate_timeout: float = 900.0
    providers: dict[str, str] = field(
        default_factory=lambda: {"implementer": "scripted", "reviewer": "scripted"}
    )
    share: tuple[Share, ...] = ()
    post_create: tuple[tuple[str, ...], ...] = ()
    env_allow: tuple[str, ...] = ()


def _int(source: str, key: str, value: Any, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError(f"{source}: '{key}' must be a whole number ≥ {minimum}, not {value!r}")
    return value


def _strings(source: str, key: str, value: Any, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"{source}: '{key}' must be a list of non-empty strings")
    if not value and not allow_empty:
        raise UsageError(f"{source}: '{key}' is an empty command")
    return tuple(value)


def _apply(base: dict[str, Any], data: Any, source: str) -> None:
    if data is None:
        return
    if not isinstance(data, dict):
        raise UsageError(f"{source}: the top level must be a mapping of keys to values")
    known = {"max_rounds", "max_gate_bounces", "max_relaunches", "gate_timeout", "roles",
             "share", "post_create", "env_allow"}
    for key, value in data.items():
        if key not in known:
            raise UsageError(
                f"{source}: unknown key '{key}'", f"known keys: {', '.join(sorted(known))}"
            )
        if key in ("max_rounds", "max_gate_bounces"):
            base[key] = _int(source, key, value)
        elif key == "max_relaunches":
            base[key] = _int(source, key, value, minimum=0)
        elif key == "gate_timeout":
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise UsageError(f"{source}: 'gate_timeout' must be a positive number of seconds")
            base[key] = float(value)
        elif key == "roles":
            base["providers"] = {**base["providers"], **_roles(source, value)}
        elif key == "share":
            base["share"] = _shares(source, value)
        elif key == "post_create":
            if not isinstance(value, list):
                raise UsageError(f"{source}: 'post_create' must be a list of argv lists")
            base["post_create"] = tuple(
                _strings(source, f"post_create[{i}]", v, allow_empty=False)
                for i, v in enumerate(value)
            )
        else:
            base["env_allow"] = _strings(source, key, value)


def _roles(source: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise UsageError(f"{source}: 'roles' must map a role to {{provider: NAME}}")
    out: dict[str, str] = {}
    for role, spec in value.items():
        if role not in ROLES:
            raise UsageError(f"{source}: roles.{role}: unknown role", f"roles are {ROLES}")
        if not isinstance(spec, dict) or not isinstance(spec.get("provider"), str):
            raise UsageError(f"{source}: roles.{role}.provider must be a provider name")
        out[role] = spec["provider"]
    return out


def _shares(source: str, value: Any) -> tuple[Share, ...]:
    if not isinstance(value, list):
        raise UsageError(f"{source}: 'share' must be a list of {{path, mode}}")
    shares = []
    for i, item in enumerate(value):
        spec = {"path": item} if isinstance(item, str) else item
        if not isinstance(spec, dict) or not isinstance(spec.get("path"), str):
            raise UsageError(f"{source}: share[{i}] needs a 'path'")
        path, mode = spec["path"], spec.get("mode", "symlink")
        if Path(path).is_absolute() or ".." in Path(path).parts:
            raise UsageError(f"{source}: share[{i}].path must be relative inside the repo")
        if mode not in SHARE_MODES:
            raise UsageError(f"{source}: share[{i}].mode must be one of {SHARE_MODES}")
        shares.append(Share(path=path, mode=mode))
    return tuple(shares)


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML: {exc}") from None


def load(home: Path, repo: Path | None) -> Config:
    """Read the user's and the repo's config files (both optional) over the defaults."""
    defaults = Config()
    merged: dict[str, Any] = {
        "max_rounds": defaults.max_rounds,
        "max_gate_bounces": defaults.max_gate_bounces,
        "max_relaunches": defaults.max_relaunches,
        "gate_timeout": defaults.gate_timeout,
        "providers": dict(defaults.providers),
        "share": defaults.share,
        "post_create": defaults.post_create,
        "env_allow": defaults.env_allow,
    }
    for path in (home / "config.yaml", repo / REPO_CONFIG if repo else None):
        if path is not None and path.is_file():
            _apply(merged, _read(path), str(path))
    return Config(**merged)


TEMPLATE = """\
# handoff configuration for this repository (all keys optional)
max_rounds: 3          # review rounds before escalating
max_gate_bounces: 3    # failed verification gates before escalating
max_relaunches: 2      # restarts of a dying peer per round before asking a person
gate_timeout: 900      # seconds the verification command may take
roles:
  implementer: {provider: scripted}
  reviewer: {provider: scripted}
share: []              # e.g. [{path: .venv, mode: symlink}, {path: node_modules, mode: copy}]
post_create: []        # argv lists run in each new worktree, e.g. [["npm", "ci"]]
env_allow: []          # extra environment variables peers may see
"""


def config_template(repo_top: Path) -> Path | None:
    """Write a commented .handoff.yaml into the repo; None when one exists (never overwritten)."""
    path = repo_top / REPO_CONFIG
    if path.exists():
        return None
    path.write_text(TEMPLATE, encoding="utf-8")
    return path

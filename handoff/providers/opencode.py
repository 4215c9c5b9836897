"""opencode (`opencode`, npm opencode-ai), measured on 1.18.33 (whole tickets run against a
stand-in Anthropic API).

`opencode DIR --auto --prompt MESSAGE`: DIR is the project, `--auto` lets it act without
asking. It draws in the alternate screen: a transcript holds the last screen (its own session
store under ~/.local/share/opencode keeps the rest). Its input line sits in a box of "┃"
lines closed by "╹▀▀▀", above the agent/model line. It has no system-prompt flag for the role
contract: the brief carries it.

Its signals come from handoff's own opencode plugin (hooks/opencode-signal.js), loaded for the
peer's session alone through OPENCODE_CONFIG_CONTENT: opencode merges that JSON over the
person's own configuration (their `plugin` list is kept and ours appended, measured on 1.18.33),
so handoff writes neither their ~/.config/opencode nor the worktree's .opencode/. The plugin
turns a user message (`chat.message`, said once its session is busy) into a prompt signal, the
session going idle into a stop signal, and a permission or question still unanswered after a
few seconds into a permission signal (--auto answers each at once).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from handoff.providers.base import Check, Launch, Level, Provider
from handoff.providers.clistate import LOGIN, TREE, Seed
from handoff.providers.screen import Blocker, ScreenRules, lines_of
from handoff.providers.signals import script as signal_script

BAR = "┃"
#: the right-hand sidebar of the session view, and the input line's own end
_SIDEBAR = re.compile(r"\s{6,}")


@dataclass(frozen=True)
class BoxRules(ScreenRules):
    """The input line is the first non-empty line of the last "┃" box (above its agent line).

    A role's own composer marker (roles.<role>.markers) replaces the box: the screen is then
    read by the generic rules, as for any CLI whose screen handoff does not know."""

    @property
    def boxed(self) -> bool:
        return self.composer == BAR

    def composer_index(self, lines: list[str]) -> int | None:
        if not self.boxed:
            return super().composer_index(lines)
        bottom = next((i for i in range(len(lines) - 1, -1, -1) if "╹▀" in lines[i]), None)
        if bottom is None or bottom < 2:
            return None
        top = bottom - 1  # the agent/model line ("┃  Build · …")
        while top - 1 >= 0 and lines[top - 1].lstrip().startswith(BAR):
            top -= 1
        box = range(top, bottom - 1)
        filled = [i for i in box if _text(lines[i])]
        return filled[0] if filled else (top + 1 if top + 1 < bottom - 1 else top)

    def _last_echo(self, lines: list[str]) -> int:
        # sent messages and errors are alike "┃" bubbles: the whole page counts (it is one
        # alternate screen, so old turns scroll away)
        return 0 if self.boxed else super()._last_echo(lines)

    def submitted(self, screen: str, message: str) -> bool:
        """message shows above the input box. opencode wraps a long message inside its bubble
        wherever the row is full, even within a path ("…/state/repo-" then "b047…"), and draws
        its sidebar on the same rows: the bubbles' own text is compared, every blank removed."""
        lines = lines_of(screen)
        composer = self.composer_index(lines)
        shown = "".join(_bubble(line) for line in (lines if composer is None else lines[:composer]))
        return "".join(message.split()) in "".join(shown.split())

    def draft(self, lines: list[str]) -> str | None:
        if not self.boxed:
            return super().draft(lines)
        index = self.composer_index(lines)
        if index is None:
            return None
        text = _text(lines[index])
        return "" if any(text.startswith(p) for p in self.placeholders) else text


def _bubble(line: str) -> str:
    """A transcript row's own text: without its "┃" and the sidebar beside it."""
    text = line.strip()
    text = text[len(BAR):] if text.startswith(BAR) else text
    return _SIDEBAR.split(text.strip(), 1)[0]


def _text(line: str) -> str:
    text = line.strip()
    if not text.startswith(BAR):
        return ""
    rest = text[len(BAR):]
    if _SIDEBAR.match(rest):
        # nothing where the input starts: only the box's right-hand label, the folder and
        # branch, which a long path wraps onto the input rows (seen in a worktree under /tmp)
        return ""
    return _SIDEBAR.split(rest.strip(), 1)[0]


RULES = BoxRules(
    composer=BAR,
    busy=(r"esc interrupt", r"esc again to interrupt"),
    blockers=(
        Blocker("unreachable", r"Cannot connect to API|Unable to connect",
                "the model API cannot be reached: check the network or the provider's "
                "base URL", patience=60.0),
        Blocker("api-error", r"Service Unavailable|Unauthorized|invalid x-api-key|"
                r"authentication_error", "read the error on the peer's screen (handoff "
                "attach TICKET --role ROLE); check the provider's key", patience=30.0),
    ),
    placeholders=("Ask anything",),
)


class Opencode(Provider):
    name = "opencode"
    binary = "opencode"
    package = "opencode-ai"
    proven = ("1.18.33", "1.18.33")
    env_allow = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY",
                 "OPENAI_BASE_URL", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
    modes = ("bypass", "default")
    exit_keys = ("/exit", "Enter")
    rules = RULES
    probe_flags = True
    signals = True
    #: what a role's own XDG folders get of the person's at every launch: their opencode
    #: configuration folder (opencode.json, agents, commands, plugins, and the manifest of its
    #: plugin-API install; that install itself, node_modules, is linked: `links`) and their
    #: provider logins (auth.json, 600)
    seeds = (Seed("config/opencode", TREE, skip=("node_modules",)),
             Seed("data/opencode/auth.json", LOGIN))
    #: nothing it writes is kept: handoff reads none of its session store, and its snapshots
    #: are git repositories opencode runs git in
    keeps = ()

    def state_env(self) -> dict[str, str]:
        """XDG_CONFIG_HOME and the others at the role's own folders: opencode has no variable
        of its own for its data or state (measured on 1.18.33)."""
        if self.own is None:
            return {}
        return {name: str(self.own / base) for (name, _), base in zip(XDG, BASES, strict=True)}

    def seed_source(self, person: Mapping[str, str], path: str) -> Path:
        base, rest = path.split("/", 1)
        return _xdg(person, BASES.index(base)) / rest

    def links(self, person: Mapping[str, str]) -> dict[str, Path]:
        """What the peer's other tools find in the XDG folders (git's config and global ignore
        under ~/.config/git, a tool's installs under ~/.local/share, …) as they are in the
        person's, read-only in the fence: a link to each entry beside opencode's own; and the
        person's install of opencode's plugin API, which opencode would otherwise install
        again from the registry at every start."""
        found: dict[str, Path] = {}
        for index, base in enumerate(BASES):
            folder = _xdg(person, index)
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name != "opencode":
                        found[f"{base}/{entry.name}"] = folder / entry.name
        found["config/opencode/node_modules"] = _xdg(person, 0) / "opencode" / "node_modules"
        return found

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary, str(launch.worktree)]
        if self.mode == "bypass":
            argv.append("--auto")
        if spec.model:
            argv += ["-m", spec.model]
        return [*argv, *spec.args, "--prompt", launch.message]

    def env(self, launch: Launch) -> dict[str, str]:
        # a peer nobody watches must not update itself mid-ticket
        env = {"OPENCODE_DISABLE_AUTOUPDATE": "1"}
        if launch.signals is not None:
            env[CONFIG_CONTENT] = config_content(launch.signals, self._own_content())
        return env

    def state_dirs(self, env: Mapping[str, str]) -> list[Path]:
        """opencode's own folders, by the XDG variables it reads (measured on 1.18.33):
        config (it writes a .gitignore there and installs its plugin API into node_modules),
        data (its session database, logs and snapshots), state (locks, the last model), cache."""
        if self.own is not None:
            # all of a role's own folders: what its other tools read beside opencode's folders
            # are links there (`links`), which the peer must see
            return [self.own]
        return [_xdg(env, index) / "opencode" for index in range(len(XDG))]

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        """opencode installs its plugin API (@opencode-ai/plugin) into its config folder at
        every start until it is there, and waits for that install before it loads any plugin,
        handoff's too: offline the first prompt waited ~70 s for the install to give up."""
        installed = self.state_dirs(env)[0] / "node_modules"
        if installed.is_dir():
            return []
        return [Check(Level.WARN, "opencode plugin API", f"{installed} does not exist yet: at each "
                      "peer's start opencode installs @opencode-ai/plugin there from the npm "
                      "registry and loads handoff's plugin only after (offline it retried for "
                      "about 70 s first)", "run `opencode` once where the npm registry is "
                      "reachable: it installs the package and later starts skip it")]

    def _own_content(self) -> str:
        """The person's own OPENCODE_CONFIG_CONTENT, when this role passes it to the peer (ours
        replaces the variable, so theirs is merged into it)."""
        if CONFIG_CONTENT not in self.passthrough(dict(os.environ)):
            return ""
        return os.environ.get(CONFIG_CONTENT, "")


#: the XDG base folders opencode keeps its state under, and their defaults below HOME
XDG = (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"),
       ("XDG_STATE_HOME", ".local/state"), ("XDG_CACHE_HOME", ".cache"))
#: a role's own folders for them, beneath its folder
BASES = ("config", "data", "state", "cache")


def _xdg(env: Mapping[str, str], index: int) -> Path:
    """The XDG base folder XDG[index] as env sets it, else its default below HOME."""
    name, default = XDG[index]
    return Path(env.get(name) or Path(env.get("HOME") or os.path.expanduser("~")) / default)


#: opencode's inline configuration, merged over every configuration file it reads (last)
CONFIG_CONTENT = "OPENCODE_CONFIG_CONTENT"


def plugin() -> Path:
    """handoff's opencode plugin, shipped beside peer-signal."""
    return Path(str(resources.files("handoff.hooks").joinpath("opencode-signal.js")))


def config_content(folder: Path, own: str = "") -> str:
    """The peer's OPENCODE_CONFIG_CONTENT: handoff's plugin with its signal folder and script as
    the plugin's options (opencode's `[spec, options]` form), so nothing else is needed in the
    peer's environment. own: the person's own inline configuration, kept (their plugins first);
    when it is no JSON object handoff cannot merge it and it stays as it was, without signals
    (the screen still tells the peer's state)."""
    entry = [plugin().as_uri(), {"folder": str(folder), "script": str(signal_script())}]
    config: dict[str, object] = {}
    if own.strip():
        try:
            parsed = json.loads(own)
        except ValueError:
            return own
        if not isinstance(parsed, dict):
            return own
        config = parsed
    plugins = config.get("plugin")
    config["plugin"] = [*(plugins if isinstance(plugins, list) else []), entry]
    return json.dumps(config, separators=(",", ":"))

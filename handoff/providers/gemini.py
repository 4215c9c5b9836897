"""Gemini CLI (`gemini`, npm @google/gemini-cli), start-up measured on 0.61.

The first brief is the positional prompt (interactive since 0.61). `--skip-trust` avoids the
folder-trust screen, `--approval-mode yolo` lets it act without asking. Its authentication
screen must never show: a prompt given before it is answered is lost ("Content generator not
initialized"), so doctor and start refuse until the method is chosen in its settings. It has
no system-prompt flag for the role contract: the brief carries it. Its node processes ignore
the pane's SIGHUP: handoff's reaper ends them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from handoff.providers.base import Check, Launch, Provider
from handoff.providers.screen import Blocker, Dialog, ScreenRules

AUTH_FIX = ("choose the authentication once: write ~/.gemini/settings.json "
            "{\"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}}} and export "
            "GEMINI_API_KEY, or run `gemini` once in a terminal and pick a method")
DIALOGS = (
    Dialog("trust", ("Do you trust the files in this folder?",), (),
           "handoff passes --skip-trust; trust the folder once by hand in gemini"),
    Dialog("auth", ("How would you like to authenticate",), (), AUTH_FIX),
    Dialog("api-key-entry", ("Enter Gemini API Key",), (), AUTH_FIX),
)
BLOCKERS = (
    Blocker("quota", r"Quota exceeded|RESOURCE_EXHAUSTED|status 429",
            "out of quota or rate-limited: wait, or switch the role's model", patience=20.0),
    Blocker("unreachable", r"API Error: .*(fetch failed|ECONNREFUSED|ENOTFOUND|connect)",
            "the Gemini API cannot be reached: check the network or GOOGLE_GEMINI_BASE_URL"),
    Blocker("api-error", r"✕ \[API Error", "read the error on the peer's screen "
            "(handoff attach TICKET --role ROLE)"),
)


def rules_for(composer: str) -> ScreenRules:
    # the input line is " * …" in yolo mode, " > …" otherwise; sent messages show as " > …"
    return ScreenRules(composer=composer, busy=(r"esc to cancel",), dialogs=DIALOGS,
                       blockers=BLOCKERS, placeholders=("Type your message",))


class Gemini(Provider):
    name = "gemini"
    binary = "gemini"
    package = "@google/gemini-cli"
    proven = ("0.61.0", "0.61.0")
    env_allow = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_APPLICATION_CREDENTIALS")
    modes = ("bypass", "auto_edit", "default")
    exit_keys = ("/quit", "Enter")
    probe_flags = True

    def own_rules(self) -> ScreenRules:
        return rules_for("*" if self.mode == "bypass" else ">")

    def argv(self, launch: Launch) -> list[str]:
        spec = self.spec
        argv = [self.executable() or self.binary, "--approval-mode",
                "yolo" if self.mode == "bypass" else self.mode, "--skip-trust"]
        if spec.model:
            argv += ["-m", spec.model]
        return [*argv, *spec.args, launch.message]

    def checks(self, repo: Path, env: dict[str, str]) -> list[Check]:
        home = Path(env.get("HOME") or os.path.expanduser("~"))
        path = home / ".gemini" / "settings.json"
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        chosen = ((data.get("security") or {}).get("auth") or {}).get("selectedType") \
            if isinstance(data, dict) else None
        if not chosen:
            return [Check("FAIL", "gemini auth", f"{path} names no authentication method: "
                          "gemini would ask, and lose the brief", AUTH_FIX)]
        if chosen == "gemini-api-key" and not env.get("GEMINI_API_KEY"):
            return [Check("FAIL", "gemini key", "gemini authenticates with an API key and "
                          "GEMINI_API_KEY is not set", "export GEMINI_API_KEY before handoff")]
        return []

"""Layered YAML configuration → typed objects.

Layers, later winning: built-in defaults, `$HANDOFF_HOME/config.yaml` (the user's), and
`<repo>/.handoff.yaml` (the project's). Every error names the file and the key.

What a configuration is (model), its plain values (values), the keys with a structure of their
own (sections), the team (roles), the table of keys that reads a file (keys), and the files
themselves (loading). The rest of handoff imports what it uses from here.
"""

from __future__ import annotations

from handoff.config.loading import (
    REPO_CONFIG,
    TEMPLATE,
    config_template,
    files,
    load,
    set_in,
    settings,
)
from handoff.config.model import (
    HOSTS_HINT,
    LIST_PLACEHOLDERS,
    PEER_NICE,
    TEXT_PLACEHOLDERS,
    Budget,
    Config,
    Host,
    Limits,
    Sandbox,
    Scanner,
    Share,
    show_size,
)
from handoff.config.sections import SSH_REFUSED, ssh_refused

__all__ = [
    "HOSTS_HINT", "LIST_PLACEHOLDERS", "PEER_NICE", "REPO_CONFIG", "SSH_REFUSED", "TEMPLATE",
    "TEXT_PLACEHOLDERS", "Budget", "Config", "Host", "Limits", "Sandbox", "Scanner", "Share",
    "config_template", "files", "load", "set_in", "settings", "show_size", "ssh_refused",
]

"""What a peer's state is read from outside by: the names of the signal events a CLI's hooks
drop (handoff.providers.signals reads them), and the lines the scripted agent prints and the
folder it drops its own signals into (handoff.providers.scripted reads them).

Standard library only, and in no package that imports more: the scripted agent starts in every
pane of the demo and the tests, and importing handoff.providers (every CLI's provider) was
about 35 ms of each start (bench floor)."""

#: a prompt arrived, a turn ended, the CLI says something (Claude Code's Notification), the CLI
#: asks a permission (Codex's PermissionRequest)
PROMPT, STOP, NOTIFICATION, PERMISSION = "prompt", "stop", "notification", "permission"

#: the scripted agent's lines: a message taken, its turn over
TOOK = "scripted: took"
WAITING = "scripted: waiting for the next message"
#: what makes it leave, like Claude Code's /exit
EXIT = "/exit"
#: what it shows when its script spends its quota (`quota: first`), as a CLI's usage-limit
#: message: the role's fallback takes over (handoff.loop.failover)
QUOTA = "scripted: usage limit reached"
#: the folder the scripted agent drops its signal files into, as a CLI's hooks would
SIGNALS_VARIABLE = "HANDOFF_SIGNALS"

"""Scripts shipped with handoff. `peer-signal` is what a peer CLI's hooks run (wired per launch
on the CLI's command line, e.g. Claude Code's --settings: handoff.providers.signals); nothing is
installed anywhere. `opencode-signal.js` is the plugin an opencode peer loads (through
`OPENCODE_CONFIG_CONTENT`, for its session alone) to run `peer-signal` on opencode's own events.
`post-create.example` is a sample `post_create` command to copy.

The repository's Claude Code plugin (.claude-plugin/) adds `hooks.json` and `plugin-signal`
here; they are not part of the Python package."""

"""handoff.providers.opencode: how opencode is launched, and its signals from handoff's plugin."""

from __future__ import annotations

import json
from pathlib import Path

from handoff.providers.signals import script

#: opencode 1.18.33's bus events and hook calls, in the order a real session made them (one
#: turn with a subagent, an --auto permission answered at once, one left open), then the
#: signal files the plugin must have left
PLUGIN_RUN = r"""
const [plugin, folder, script] = process.argv.slice(2)
const hooks = await (await import(plugin)).default({}, { folder, script })
const ev = (type, properties) => hooks.event({ event: { id: "e", type, properties } })
const prompt = (sessionID, text) =>
  hooks["chat.message"]({ sessionID }, { parts: [{ type: "text", text },
                                                 { type: "text", text: "hint", synthetic: true }] })
await ev("session.created", { sessionID: "main", info: { id: "main" } })
await prompt("main", "Read and follow /x/brief-1.md")
await ev("session.status", { sessionID: "main", status: { type: "busy" } })
await ev("session.created", { sessionID: "kid", info: { id: "kid", parentID: "main" } })
await prompt("kid", "a subagent's own task")
await ev("session.status", { sessionID: "kid", status: { type: "idle" } })
await ev("session.idle", { sessionID: "kid" })
await ev("permission.asked", { id: "per_1", sessionID: "main", permission: "external_directory",
                               patterns: ["/x/*"] })
await ev("permission.replied", { sessionID: "main", requestID: "per_1", reply: "once" })
await ev("permission.asked", { id: "per_2", sessionID: "main", permission: "bash",
                               patterns: ["rm -r build"] })
await ev("session.status", { sessionID: "main", status: { type: "busy" } })
await ev("session.status", { sessionID: "main", status: { type: "idle" } })
await ev("session.idle", { sessionID: "main" })
const { readdirSync } = await import("node:fs")
const said = () => { try { return readdirSync(folder) } catch { return [] } }
const deadline = Date.now() + 20000  // the open permission is said after its grace
while (!said().some((n) => n.startsWith("permission.")) && Date.now() < deadline)
  await new Promise((r) => setTimeout(r, 50))
"""


def test_opencodes_plugin_says_prompt_stop_and_an_unanswered_permission_once_each(
        tmp_path: Path) -> None:
    import shutil
    import subprocess

    from handoff.providers.opencode import plugin

    node = shutil.which("node")
    assert node is not None, "node (which npm, and so opencode's install, needs) is missing"
    run = tmp_path / "run.mjs"
    run.write_text(PLUGIN_RUN, encoding="utf-8")
    folder = tmp_path / "signals"
    done = subprocess.run([node, str(run), plugin().as_uri(), str(folder), str(script())],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    said = [(p.name.split(".", 1)[0], json.loads(p.read_text())) for p in files]
    assert [name for name, _ in said] == ["prompt", "stop", "permission"], said
    assert said[0][1]["prompt"] == "Read and follow /x/brief-1.md", "typed text only"
    assert said[0][1]["session_id"] == said[1][1]["session_id"] == "main"
    assert said[1][1]["type"] == "session.idle"
    asked = said[2][1]
    assert (asked["type"], asked["tool_name"], asked["message"], asked["request_id"]) == \
        ("permission.asked", "bash", "rm -r build", "per_2")
    assert done.stdout == "", "the plugin prints nothing into the peer's screen"


def test_opencodes_plugin_without_its_options_does_nothing(tmp_path: Path) -> None:
    import shutil
    import subprocess

    from handoff.providers.opencode import plugin

    node = shutil.which("node")
    assert node is not None
    code = ("const hooks = await (await import(process.argv[1])).default({}, undefined);"
            "process.stdout.write(JSON.stringify(Object.keys(hooks)))")
    done = subprocess.run([node, "--input-type=module", "-e", code, plugin().as_uri()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "[]", done.stderr

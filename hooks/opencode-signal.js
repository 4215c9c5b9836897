// handoff's opencode plugin: tells the orchestrator that a peer's prompt arrived, that its turn
// ended, or that it waits for a person, by running handoff's peer-signal script (one JSON file
// per event in the peer's signal folder). It is loaded for one peer's session alone, through
// the OPENCODE_CONFIG_CONTENT handoff sets when it starts the peer (handoff/providers/opencode.py):
//
//   {"plugin": [["file:///…/opencode-signal.js", {"folder": "<signals>", "script": "<peer-signal>"}]]}
//
// Measured on opencode 1.18.33: a plugin's `chat.message` hook runs when a user message is
// created (before the model is asked; a message sent while a turn runs too), its `event` hook
// sees every bus event of the instance (as {event: {id, type, properties}}):
// `session.status` ({sessionID, status: {type: idle|busy|retry}}), `session.idle` ({sessionID}),
// `permission.asked` ({id, sessionID, permission, patterns, metadata, always, tool}),
// `permission.replied` ({sessionID, requestID, reply}), `question.asked`/`.replied`/`.rejected`,
// `session.created`/`.updated` ({sessionID, info: {id, parentID?, …}}). The `permission.ask`
// hook of older releases is never called there.
//
// Nothing here may break the peer: every failure is swallowed, and nothing is printed.

import { spawn } from "node:child_process"

// --auto makes the TUI answer every permission itself, a few milliseconds after it is asked
// (measured: 12-50 ms): only one still open after this long waits for a person
const PERSON_GRACE_MS = 3000
// a user message is said once its session is busy (40-130 ms after chat.message, measured),
// when the turn has really started (one sent during a turn: at the turn's next step), not
// while the TUI still shows the message in its input line. Said anyway if no busy comes.
const BUSY_WAIT_MS = 2000
const PROMPT_CHARS = 2000
const SCRIPT_WAIT_MS = 5000

export default async function handoffSignals(_input, options) {
  const folder = options?.folder
  const script = options?.script
  if (typeof folder !== "string" || typeof script !== "string") return {}

  // subagent sessions (the task tool) have turns of their own: they are not the peer's
  const children = new Set()
  // main sessions whose end of turn was signalled since they were last busy: opencode says a
  // turn ended twice (session.status idle, then session.idle), handoff hears it once
  const ended = new Set()
  // open requests (permission or question id) → the timer that reports them
  const open = new Map()
  // main sessions → the user message not yet said ({data, timer})
  const prompts = new Map()

  // one signal at a time: the orchestrator orders them by their files' times, so a prompt
  // said just before a turn's end must be written before it
  let queue = Promise.resolve()

  function signal(event, data) {
    queue = queue.then(() => new Promise((done) => {
      const guard = setTimeout(done, SCRIPT_WAIT_MS) // a script that hangs holds up no other
      guard.unref?.()
      const finish = () => { clearTimeout(guard); done() }
      try {
        const child = spawn("sh", [script, folder, event], { stdio: ["pipe", "ignore", "ignore"] })
        child.on("error", finish)
        child.on("close", finish)
        child.stdin.on("error", () => {})
        child.stdin.end(JSON.stringify(data))
      } catch {
        finish() // no shell, no script: the orchestrator reads the screen instead
      }
    }))
  }

  function mine(sessionID) {
    return typeof sessionID === "string" && !children.has(sessionID)
  }

  function promptSaid(sessionID) {
    const waiting = prompts.get(sessionID)
    if (waiting === undefined) return
    clearTimeout(waiting.timer)
    prompts.delete(sessionID)
    signal("prompt", waiting.data)
  }

  function turnEnded(sessionID, how) {
    if (!mine(sessionID) || ended.has(sessionID)) return
    ended.add(sessionID)
    signal("stop", { hook_event_name: how, type: how, session_id: sessionID })
  }

  function waitsForPerson(kind, props) {
    const id = props.id
    if (!mine(props.sessionID) || typeof id !== "string" || open.has(id)) return
    const timer = setTimeout(() => {
      open.delete(id)
      const what = kind === "question.asked" ? "question" : String(props.permission ?? "")
      const patterns = Array.isArray(props.patterns) ? props.patterns.join(", ") : ""
      signal("permission", {
        hook_event_name: kind, type: kind, session_id: props.sessionID, request_id: id,
        tool_name: what, message: patterns, properties: props,
      })
    }, PERSON_GRACE_MS)
    timer.unref?.()
    open.set(id, timer)
  }

  function answered(requestID) {
    const timer = open.get(requestID)
    if (timer === undefined) return
    clearTimeout(timer)
    open.delete(requestID)
  }

  return {
    "chat.message": async (input, output) => {
      if (!mine(input?.sessionID)) return
      ended.delete(input.sessionID)
      const parts = Array.isArray(output?.parts) ? output.parts : []
      const text = parts.filter((p) => p?.type === "text" && !p.synthetic)
        .map((p) => String(p.text ?? "")).join("\n")
      const data = {
        hook_event_name: "chat.message", type: "chat.message", session_id: input.sessionID,
        prompt: text.slice(0, PROMPT_CHARS),
      }
      promptSaid(input.sessionID) // an earlier one still waiting: said first, in order
      const timer = setTimeout(() => promptSaid(input.sessionID), BUSY_WAIT_MS)
      timer.unref?.()
      prompts.set(input.sessionID, { data, timer })
    },
    event: async ({ event }) => {
      const props = event?.properties ?? {}
      switch (event?.type) {
        case "session.created":
        case "session.updated":
          if (props.info?.parentID && typeof props.info.id === "string") children.add(props.info.id)
          return
        case "session.status":
          if (props.status?.type === "idle") {
            promptSaid(props.sessionID)
            turnEnded(props.sessionID, "session.idle")
          } else {
            ended.delete(props.sessionID)
            if (props.status?.type === "busy") promptSaid(props.sessionID)
          }
          return
        case "session.idle":
          promptSaid(props.sessionID)
          turnEnded(props.sessionID, "session.idle")
          return
        case "permission.asked":
        case "question.asked":
          waitsForPerson(event.type, props)
          return
        case "permission.replied":
        case "question.replied":
        case "question.rejected":
          answered(props.requestID)
          return
      }
    },
  }
}

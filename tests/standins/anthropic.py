"""A stand-in for the Anthropic Messages API, so tests can drive the real Claude Code offline.

Claude Code talks to `ANTHROPIC_BASE_URL` with `POST /v1/messages?beta=true` (streamed SSE).
This server is stateless like the real API: every main-loop request carries the whole
conversation, so the turn's prompt and the tool results so far are read back out of it and
handed to the brain (tests/standins/brain.py), whose one next action is rendered as a
`tool_use` block (Claude Code then runs its own Read/Edit/Write/Bash tool) or as final text.

opencode (through the AI SDK's Anthropic provider, `ANTHROPIC_BASE_URL=…/v1`) sends the same
Messages API with tools of its own: `read`, `edit`, `write`, `bash`, taking `filePath`,
`oldString`, `newString`, `workdir`. The dialect each request is rendered in is read from the
tools it declares (`dialect_of`), so one stand-in drives both CLIs.

    with AnthropicStandIn() as api:
        env = claude_env(home, api.base_url)          # tests/standins/homes.py
        ...launch claude in tmux, wait for the work...
        assert api.turn_prompts() == ["Read and follow /abs/brief-1.md"]
        assert not api.errors

Side requests (anything that does not offer the coding tools: titles, summaries…) get a
short plain answer; every other endpoint gets a harmless 200 so Claude Code never retries.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from tests.standins import brain
from tests.standins.brain import Action, Edit, Read, Say, Shell, Write
from tests.standins.server import LocalServer, StandInError

Mind = Callable[[str, Sequence[str]], Action]

#: tool names whose presence marks a main-loop (agent) request; compared case-insensitively
CODING_TOOLS = frozenset({"bash", "read", "edit", "write"})

#: context Claude Code puts into user messages that the user never typed: 2.1.328 sends the
#: gitStatus snapshot and the commit-attribution rules as separate `<system-reminder>\n…
#: </system-reminder>` text blocks before the typed text (hook output and the environment go
#: into a `system`-role message instead, which turn_of skips); local-command-* wrap slash-command
#: output in transcripts
INJECTED = re.compile(
    r"<(system-reminder|local-command-caveat|local-command-stdout|local-command-stderr)\b[^>]*>"
    r".*?</\1>", re.S)
#: a paste over ~800 chars arrives as `<pasted_content id=…>TEXT</pasted_content>`: the text is
#: still the user's message, so only the tags go
PASTE_TAG = re.compile(r"</?pasted_content\b[^>]*>")
#: a message sent while a turn runs is injected into it (after the next tool result) as
#: "The user sent a new message while you were working:\n<text>\n\nThis is how Claude Code
#: surfaces…": the brain must see <text> (a new brief starts "Read and follow")
MID_TURN = re.compile(r"The user sent a new message while you were working:\n(.*?)"
                      r"(?:\n\nThis is how Claude Code surfaces messages.*)?\Z", re.S)


#: Claude Code on Vertex AI (CLAUDE_CODE_USE_VERTEX=1, ANTHROPIC_VERTEX_BASE_URL at this server)
#: posts a Messages-API body without `model` here, and reads the same event stream back
VERTEX = re.compile(r"/v1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)/publishers/"
                    r"anthropic/models/(?P<model>[^/:]+):(?P<how>streamRawPredict|rawPredict)")


@dataclass(frozen=True)
class Exchange:
    """One request the stand-in answered (bodies kept for debugging a failing test)."""

    method: str
    path: str
    main_loop: bool
    stream: bool
    #: main loop only: the turn's prompt and the tool results after it, in order
    prompt: str | None = None
    results: tuple[str, ...] = ()
    #: main loop only: what the brain chose, and the content block that was sent for it
    action: Action | None = None
    sent: Mapping[str, Any] | None = None
    body: Any = None
    at: float = field(default_factory=time.monotonic)


class AnthropicStandIn(LocalServer[Exchange]):
    """A Messages API on 127.0.0.1:<free port>, served from a daemon thread.

    mind: the action chooser (default: brain.next_action); tests may pass their own, e.g. one
    that returns Shell("sleep 5") to keep a turn busy. delay: seconds to wait before answering
    each main-loop request (the spinner stays up meanwhile).
    """

    def __init__(self, mind: Mind = brain.next_action, delay: float = 0.0) -> None:
        super().__init__()
        self.mind = mind
        self.delay = delay
        self._ids = itertools.count(1)
        #: text in a turn's prompt → the error the API answers with (HTTP 400, as Anthropic's
        #: own for a spent usage limit) every main-loop request of the first Claude Code
        #: session that sends it (its retries too); a later session is served
        self.refuse: dict[str, str] = {}
        #: the sessions refused so far, by the prompt text that chose them
        self.refused: dict[str, str] = {}

    # -- life cycle ------------------------------------------------------------------------

    label = "the Anthropic stand-in"
    name = "anthropic-standin"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def base_url(self) -> str:
        """What ANTHROPIC_BASE_URL is set to (Claude Code appends /v1/messages itself)."""
        return f"http://127.0.0.1:{self.port}"

    # -- what tests read -------------------------------------------------------------------

    def main_loop(self) -> list[Exchange]:
        return [e for e in self.log() if e.main_loop]

    def turn_prompts(self) -> list[str]:
        """The prompt of every turn started: main-loop requests that carry no tool result yet.

        A prompt Claude Code delivered twice shows up twice here."""
        return [e.prompt for e in self.main_loop() if e.prompt is not None and not e.results]

    def actions(self) -> list[Action]:
        return [e.action for e in self.main_loop() if e.action is not None]

    # -- answering -------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_standin_{next(self._ids):06d}"

    def refusal(self, body: Mapping[str, Any]) -> str | None:
        """The error this main-loop request is answered with (None: it is answered)."""
        if not self.refuse or not CODING_TOOLS & {n.lower() for n in _tool_names(body)}:
            return None
        session = _session_of(body)
        prompt, _ = turn_of(body.get("messages") or [])
        for needle, message in self.refuse.items():
            if prompt is None or needle not in prompt:
                continue
            chosen = self.refused.setdefault(needle, session)
            return message if chosen == session else None
        return None

    def answer_messages(self, path: str, body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str]:
        """The content blocks and stop_reason for one /v1/messages request."""
        stream = bool(body.get("stream"))
        tools = _tool_names(body)
        if not CODING_TOOLS & {name.lower() for name in tools}:
            text = _side_answer(body)
            self._record(Exchange("POST", path, False, stream, sent={"type": "text", "text": text},
                                  body=body))
            return [{"type": "text", "text": text}], "end_turn"
        prompt, results = turn_of(body.get("messages") or [])
        error: str | None = None
        action: Action | None = None
        try:
            if prompt is None:
                raise StandInError("a main-loop request without any user prompt")
            action = self.mind(prompt, results)
            block, stop = self._render(action, body)
        except Exception as exc:  # the brain or the renderer: answer visibly, let tests fail
            error = f"{path}: {type(exc).__name__}: {exc}"
            block, stop = {"type": "text", "text": f"[anthropic stand-in error] {error}"}, "end_turn"
        if self.delay:
            time.sleep(self.delay)  # deliberately slow model: keeps Claude Code's spinner up
        self._record(Exchange("POST", path, True, stream, prompt, tuple(results), action, block, body),
                     error)
        return [block], stop

    def _render(self, action: Action, body: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
        if isinstance(action, Say):
            return {"type": "text", "text": action.text}, "end_turn"
        name, args = dialect_of(body)(action)
        return {"type": "tool_use", "id": self._next_id("toolu"),
                "name": _offered(name, _tool_names(body)), "input": args}, "tool_use"


# -- dialects: one client's tool names and parameters ---------------------------------------

Dialect = Callable[[Action], tuple[str, dict[str, Any]]]


def claude_code_call(action: Action) -> tuple[str, dict[str, Any]]:
    """Claude Code's Read/Edit/Write/Bash (snake_case parameters)."""
    if isinstance(action, Read):
        return "Read", {"file_path": action.path}
    if isinstance(action, Edit):
        return "Edit", {"file_path": action.path, "old_string": action.old,
                        "new_string": action.new}
    if isinstance(action, Write):
        return "Write", {"file_path": action.path, "content": action.content()}
    if isinstance(action, Shell):
        # Claude Code's Bash keeps one shell whose cwd persists: say where, every time
        return "Bash", {"command": f"cd {_quote(action.cwd)} && {action.command}",
                        "description": "Run a step of the handoff brief"}
    raise StandInError(f"the brain returned an unknown action {action!r}")


def opencode_call(action: Action) -> tuple[str, dict[str, Any]]:
    """opencode's read/edit/write/bash (camelCase parameters, measured on 1.18.33). Its bash
    declares only command, timeout and workdir: it takes the folder as workdir, and nothing
    the schema does not name is sent."""
    if isinstance(action, Read):
        return "read", {"filePath": action.path}
    if isinstance(action, Edit):
        return "edit", {"filePath": action.path, "oldString": action.old,
                        "newString": action.new}
    if isinstance(action, Write):
        return "write", {"filePath": action.path, "content": action.content()}
    if isinstance(action, Shell):
        return "bash", {"command": action.command, "workdir": action.cwd}
    raise StandInError(f"the brain returned an unknown action {action!r}")


def dialect_of(body: Mapping[str, Any]) -> Dialect:
    """The client's dialect, measured from its declared tools: a read tool whose schema names
    `filePath` is opencode's; anything else is spoken to as Claude Code (the default, also for
    requests whose schemas name no parameters)."""
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict) or str(tool.get("name", "")).lower() != "read":
            continue
        schema = tool.get("input_schema")
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(props, dict) and "filePath" in props:
            return opencode_call
    return claude_code_call


# -- reading a request ---------------------------------------------------------------------


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    return [str(t["name"]) for t in body.get("tools") or [] if isinstance(t, dict) and "name" in t]


def _offered(name: str, offered: Sequence[str]) -> str:
    """The request's own spelling of a tool (opencode says `bash`, Claude Code `Bash`)."""
    for candidate in offered:
        if candidate.lower() == name.lower():
            return candidate
    raise StandInError(f"the request offers no tool named {name!r} (offered: {', '.join(offered)})")


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def typed_text(text: str) -> str:
    """What the user typed in one text block: without injected context, paste tags, wrapper."""
    text = PASTE_TAG.sub("", INJECTED.sub("", text)).strip()
    queued = MID_TURN.match(text)
    return queued.group(1).strip() if queued else text


def result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")


def turn_of(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[str]]:
    """(prompt, results): the newest text the user typed, and every tool result after it.

    Read block by block, not message by message: a message sent while Claude Code is busy
    arrives as a text block after the tool_result blocks of the same user message, and those
    results belong to the earlier prompt. Only `user` messages count: Claude Code also sends
    `system`-role messages (environment, hook output, "keep the user updated") mid-conversation.
    """
    flat: list[tuple[str, str]] = []  # ("text" | "result" | "end", text)
    for message in messages:
        if message.get("role") != "user":
            continue
        for block in _blocks(message.get("content")):
            if block.get("type") == "tool_result":
                flat.append(("result", result_text(block)))
            elif block.get("type") == "text" and (text := typed_text(str(block.get("text", "")))):
                flat.append(("text", text))
        flat.append(("end", ""))
    last = max((i for i, (kind, _) in enumerate(flat) if kind == "text"), default=None)
    if last is None:
        return None, []
    first = last
    while first > 0 and flat[first - 1][0] == "text":  # adjacent text blocks: one message
        first -= 1
    prompt = "\n".join(text for _, text in flat[first:last + 1])
    return prompt, [text for kind, text in flat[last + 1:] if kind == "result"]


def _side_answer(body: Mapping[str, Any]) -> str:
    """A short plain answer for a request that is not the agent's loop (title, summary…)."""
    schema = _json_schema(body)
    if schema is not None:
        return json.dumps(_fill(schema))
    asked = json.dumps(body.get("system") or "") + json.dumps(body.get("messages") or [])
    if "title" in asked.lower() and "json" in asked.lower():
        return json.dumps({"title": "Stand-in session"})
    return "Stand-in session"


def _json_schema(body: Mapping[str, Any]) -> dict[str, Any] | None:
    for holder in (body.get("output_config"), body.get("output_format")):
        if isinstance(holder, dict):
            form = holder.get("format", holder)
            if isinstance(form, dict) and form.get("type") == "json_schema":
                schema = form.get("schema")
                return schema if isinstance(schema, dict) else {}
    return None


def _fill(schema: Mapping[str, Any]) -> Any:
    """The smallest value matching a simple JSON schema (strings say "Stand-in session")."""
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {key: _fill(sub) for key, sub in props.items() if isinstance(sub, dict)}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    if schema.get("enum"):
        return schema["enum"][0]
    return "Stand-in session"


def _session_of(body: Mapping[str, Any]) -> str:
    """The Claude Code session a request is of (its metadata's user_id, a JSON text)."""
    meta = body.get("metadata")
    raw = meta.get("user_id") if isinstance(meta, dict) else None
    try:
        said = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return str(raw)
    return str(said.get("session_id", "")) if isinstance(said, dict) else str(raw)


def _quote(path: str) -> str:
    return "'" + path.replace("'", "'\\''") + "'"


# -- writing a response --------------------------------------------------------------------


def _usage(output_tokens: int) -> dict[str, int]:
    return {"input_tokens": 10, "output_tokens": output_tokens, "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0}


def message_json(msg_id: str, model: str, blocks: Sequence[Mapping[str, Any]], stop: str) -> dict[str, Any]:
    return {"id": msg_id, "type": "message", "role": "assistant", "model": model,
            "content": list(blocks), "stop_reason": stop, "stop_sequence": None,
            "usage": _usage(_tokens(blocks))}


def sse_events(msg_id: str, model: str, blocks: Sequence[Mapping[str, Any]],
               stop: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The event sequence of a streamed message, as the real API sends it."""
    start = {**message_json(msg_id, model, [], ""), "stop_reason": None, "usage": _usage(1)}
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        else:
            head = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": index,
                                      "content_block": head}
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": _tokens(blocks)}}
    yield "message_stop", {"type": "message_stop"}


def _tokens(blocks: Sequence[Mapping[str, Any]]) -> int:
    # a plausible count for the spinner's "↓ n tokens"; nothing depends on it
    return max(1, sum(len(json.dumps(b)) for b in blocks) // 4)


def _handler_for(standin: AnthropicStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # keep-alive like the real API: Claude Code's HTTP client reuses connections
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the Exchange log is the record; stderr noise would reach pytest's output

        def _read_body(self) -> Any:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                return json.loads(raw) if raw else None
            except ValueError:
                return raw.decode("utf-8", "replace")

        def _send(self, status: int, payload: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload)))
            self.send_header("request-id", standin._next_id("req"))
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_POST(self) -> None:
            body = self._read_body()
            path = urlsplit(self.path).path.rstrip("/")
            vertex = VERTEX.fullmatch(path)
            if (path == "/v1/messages" or vertex) and isinstance(body, dict):
                refused = standin.refusal(body)
                if refused is not None:
                    self._json({"type": "error", "error": {"type": "invalid_request_error",
                                                           "message": refused}}, status=400)
                    return
                blocks, stop = standin.answer_messages(self.path, body)
                msg_id = standin._next_id("msg")
                model = str(body.get("model") or (vertex and vertex["model"]) or "claude-standin")
                if body.get("stream") or (vertex and vertex["how"] == "streamRawPredict"):
                    payload = b"".join(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
                                       for event, data in sse_events(msg_id, model, blocks, stop))
                    self._send(200, payload, "text/event-stream")
                else:
                    self._json(message_json(msg_id, model, blocks, stop))
                return
            standin._record(Exchange("POST", self.path, False, False, body=body))
            if path == "/v1/messages/count_tokens":
                self._json({"input_tokens": 10})
            else:
                self._json({})

        def do_GET(self) -> None:
            standin._record(Exchange("GET", self.path, False, False))
            if urlsplit(self.path).path.rstrip("/") == "/v1/models":
                self._json({"data": [], "has_more": False, "first_id": None, "last_id": None})
            else:
                self._json({})

        def do_HEAD(self) -> None:
            standin._record(Exchange("HEAD", self.path, False, False))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

    return Handler

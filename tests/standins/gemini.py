"""A stand-in for the Gemini API, so tests can drive the real Gemini CLI offline.

Gemini CLI (0.61) talks to `GOOGLE_GEMINI_BASE_URL` with its `GEMINI_API_KEY` in
`x-goog-api-key`. Measured: every prompt first gets a non-streaming
`POST /v1beta/models/gemini-3.5-flash-lite:generateContent` (model routing: it asks for a JSON
complexity score under `generationConfig.responseJsonSchema`), then the agent's steps go to
`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`, each answered as server-sent events
(`data: <GenerateContentResponse>` per chunk). Other side requests (the next-speaker check, …)
also ask for JSON with a schema.

The server is stateless like the real API: each request carries the whole conversation
(`contents`), so the turn's prompt (the newest text the user typed) and the tool results since
(`functionResponse` parts) are read out of it and handed to the brain
(tests/standins/brain.py), whose one next action is rendered as a `functionCall` part of
Gemini's own tools, named as the request declares them:

- Read → `read_file {file_path}`, Edit → `replace {file_path, instruction, old_string,
  new_string}`, Write → `write_file {file_path, content}`: inside the workspace only. Gemini's
  file tools refuse any path outside its workspace directories ("Path not in workspace"), and
  the brief and the report live in the ticket directory, outside the worktree: those actions
  become a `run_shell_command` (cat, or a short Python program), as a real model would fall
  back to.
- Shell → `run_shell_command {command: "cd CWD && …", description}`.
- Say → a plain text part: the turn ends.

    with GeminiStandIn() as api:
        env = {"GOOGLE_GEMINI_BASE_URL": api.base_url, "GEMINI_API_KEY": "standin", …}
        ...launch gemini in tmux, wait for the work...
        assert api.turn_prompts() == ["Read and follow /abs/brief-1.md"]
        assert not api.errors
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tests.standins import brain
from tests.standins.brain import Action, Edit, Read, Say, Shell, Write
from tests.standins.openai import render as shell_command
from tests.standins.server import LocalServer, StandInError

Mind = Callable[[str, Sequence[str]], Action]

#: /v1beta/models/<model>:<method>
ENDPOINT = re.compile(r"/v1(?:beta|alpha)?/models/(?P<model>[^/:]+):(?P<how>[A-Za-z]+)")
#: the tool whose presence marks the agent's own loop (side requests declare no tools)
SHELL_TOOL = "run_shell_command"
#: text Gemini CLI sends as a user part that nobody typed: `<session_context>…` (date, OS,
#: workspace folders, a directory listing) leads the first user message; other context comes
#: wrapped in tags the same way
INJECTED = re.compile(r"\A\s*<(?P<tag>[a-z_]+)\b[^>]*>.*</(?P=tag)>\s*\Z", re.S)
#: the workspace folders, as `<session_context>` lists them
WORKSPACE = re.compile(r"\*\*Workspace Directories:\*\*\n((?:[ \t]+- .+\n?)+)")


@dataclass(frozen=True)
class Exchange:
    """One request the stand-in answered (bodies kept for debugging a failing test)."""

    method: str
    path: str
    #: "turn" (the agent's loop), "side" (routing, next-speaker check, …), "other" (any other
    #: endpoint), "error" (the stand-in could not answer as asked)
    kind: str
    stream: bool = False
    #: turn only: the turn's prompt and the tool results after it, in order
    prompt: str | None = None
    results: tuple[str, ...] = ()
    #: turn only: what the brain chose, and the part that was sent for it
    action: Action | None = None
    sent: Mapping[str, Any] | None = None
    body: Any = None
    at: float = field(default_factory=time.monotonic)


class GeminiStandIn(LocalServer[Exchange]):
    """The Gemini API on 127.0.0.1:<free port>, served from a daemon thread.

    mind: the action chooser (default: brain.next_action). delay: seconds to wait before
    answering each turn request (the CLI's spinner stays up meanwhile).
    """

    def __init__(self, mind: Mind = brain.next_action, delay: float = 0.0) -> None:
        super().__init__()
        self.mind = mind
        self.delay = delay

    # -- life cycle ------------------------------------------------------------------------

    label = "the Gemini stand-in"
    name = "gemini-standin"

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def base_url(self) -> str:
        """What GOOGLE_GEMINI_BASE_URL is set to (the CLI appends /v1beta/models/… itself)."""
        return f"http://127.0.0.1:{self.port}"

    # -- what tests read -------------------------------------------------------------------

    def turns(self) -> list[Exchange]:
        return [e for e in self.log() if e.kind == "turn"]

    def turn_prompts(self) -> list[str]:
        """The prompt of every turn started: turn requests that carry no tool result yet.

        A prompt the CLI delivered twice shows up twice here."""
        return [e.prompt for e in self.turns() if e.prompt is not None and not e.results]

    def actions(self) -> list[Action]:
        return [e.action for e in self.turns() if e.action is not None]

    # -- answering -------------------------------------------------------------------------

    def answer(self, path: str, body: Mapping[str, Any], stream: bool) -> dict[str, Any]:
        """The GenerateContentResponse for one generateContent/streamGenerateContent request."""
        tools = declared_tools(body)
        if SHELL_TOOL not in tools:
            part = {"text": side_answer(body)}
            self._record(Exchange("POST", path, "side", stream, sent=part, body=body))
            return response([part])
        contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
        prompt, results = turn_of(contents)
        error: str | None = None
        action: Action | None = None
        try:
            if prompt is None:
                raise StandInError("a turn request without any user prompt")
            action = self.mind(prompt, results)
            part = render(action, tools, workspace_of(contents))
        except Exception as exc:  # the brain or the renderer: answer visibly, let tests fail
            error = f"{path}: {type(exc).__name__}: {exc}"
            part = {"text": f"[gemini stand-in error] {error}"}
        if self.delay:
            self._stopping.wait(self.delay)  # a deliberately slow model: the spinner stays up
        self._record(Exchange("POST", path, "turn" if error is None else "error", stream, prompt,
                              tuple(results), action, part, body), error)
        return response([part])


# -- reading a request ---------------------------------------------------------------------


def declared_tools(body: Mapping[str, Any]) -> dict[str, set[str]]:
    """Each declared function's name → its parameter names."""
    found: dict[str, set[str]] = {}
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        for declaration in tool.get("functionDeclarations") or []:
            if not isinstance(declaration, dict) or "name" not in declaration:
                continue
            schema = declaration.get("parametersJsonSchema") or declaration.get("parameters") or {}
            props = schema.get("properties") if isinstance(schema, dict) else None
            found[str(declaration["name"])] = set(props) if isinstance(props, dict) else set()
    return found


def _parts(content: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [p for p in content.get("parts") or [] if isinstance(p, dict)]


def typed(text: str) -> str:
    """What the user typed in one text part ('' for context the CLI injected)."""
    return "" if INJECTED.match(text) else text.strip()


def result_text(part: Mapping[str, Any]) -> str:
    """A functionResponse's text: `response.output` (or `.error`), else the whole response."""
    answer = part.get("response")
    if isinstance(answer, dict):
        for key in ("output", "error", "content"):
            if isinstance(answer.get(key), str):
                return str(answer[key])
        return json.dumps(answer)
    return str(answer or "")


def turn_of(contents: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[str]]:
    """(prompt, results): the newest text the user typed, and every tool result after it.

    Read part by part: the first prompt shares its user content with `<session_context>`, and
    tool results arrive as functionResponse parts of user contents. Only `user` contents count
    (the model's own text and functionCall parts are not the user's).
    """
    flat: list[tuple[str, str]] = []  # ("text" | "result" | "end", text)
    for content in contents:
        if content.get("role", "user") != "user":
            continue
        for part in _parts(content):
            if isinstance(part.get("functionResponse"), dict):
                flat.append(("result", result_text(part["functionResponse"])))
            elif isinstance(part.get("text"), str) and (text := typed(part["text"])):
                flat.append(("text", text))
        flat.append(("end", ""))
    last = max((i for i, (kind, _) in enumerate(flat) if kind == "text"), default=None)
    if last is None:
        return None, []
    first = last
    while first > 0 and flat[first - 1][0] == "text":  # adjacent text parts: one message
        first -= 1
    prompt = "\n".join(text for _, text in flat[first:last + 1])
    return prompt, [text for kind, text in flat[last + 1:] if kind == "result"]


def workspace_of(contents: Sequence[Mapping[str, Any]]) -> list[Path]:
    """The folders Gemini's file tools may touch, as its session context names them."""
    for content in contents:
        for part in _parts(content):
            match = WORKSPACE.search(str(part.get("text", "")))
            if match:
                return [Path(line.strip()[2:].strip()) for line in match.group(1).splitlines()
                        if line.strip().startswith("- ")]
    return []


def inside(path: str, folders: Sequence[Path]) -> bool:
    target = Path(path)
    return any(target == folder or folder in target.parents for folder in folders)


def side_answer(body: Mapping[str, Any]) -> str:
    """A request outside the agent's loop: JSON filling its schema, else a short text."""
    config = body.get("generationConfig")
    schema = None
    if isinstance(config, dict):
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
    if isinstance(schema, dict):
        return json.dumps(fill(schema))
    return "Stand-in session"


def fill(schema: Mapping[str, Any]) -> Any:
    """The smallest value matching a simple JSON schema (Gemini spells types in either case).

    An enum takes its first value: the next-speaker check lists "user" first (the turn ends
    there), the router's complexity score 0 picks its fast model."""
    kind = str(schema.get("type", "")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {key: fill(sub) for key, sub in props.items() if isinstance(sub, dict)}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "Stand-in session"


# -- rendering an action -------------------------------------------------------------------


def render(action: Action, tools: Mapping[str, set[str]],
           workspace: Sequence[Path]) -> dict[str, Any]:
    """The response part for the brain's action: a functionCall of a declared tool, or text."""
    if isinstance(action, Say):
        return {"text": action.text}
    name: str
    args: dict[str, Any]
    if isinstance(action, Read) and inside(action.path, workspace):
        name, args = "read_file", {"file_path": action.path}
    elif isinstance(action, Edit) and inside(action.path, workspace):
        name, args = "replace", {"file_path": action.path, "old_string": action.old,
                                 "new_string": action.new,
                                 "instruction": "Make the change the handoff brief asks for."}
    elif isinstance(action, Write) and inside(action.path, workspace):
        name, args = "write_file", {"file_path": action.path, "content": action.content()}
    elif isinstance(action, (Read, Edit, Write)):
        # outside the workspace Gemini's file tools refuse: the shell reaches everywhere
        name, args = SHELL_TOOL, {"command": shell_command(action),
                                  "description": "Work with a file of the handoff brief"}
    elif isinstance(action, Shell):
        name, args = SHELL_TOOL, {"command": f"cd {shlex.quote(action.cwd)} && {action.command}",
                                  "description": "Run a step of the handoff brief"}
    else:
        raise StandInError(f"the brain returned an unknown action {action!r}")
    if name not in tools:
        raise StandInError(f"the request declares no tool {name!r} (declared: "
                           f"{', '.join(sorted(tools))})")
    unknown = set(args) - tools[name]
    if tools[name] and unknown:
        raise StandInError(f"{name} takes no parameter {', '.join(sorted(unknown))} (it takes "
                           f"{', '.join(sorted(tools[name]))})")
    return {"functionCall": {"name": name, "args": args}}


# -- writing a response --------------------------------------------------------------------


def response(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One GenerateContentResponse: a single candidate that ends here (function calls too end
    with STOP on the real API)."""
    tokens = max(1, sum(len(json.dumps(p)) for p in parts) // 4)
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": tokens,
                              "totalTokenCount": 10 + tokens},
            "modelVersion": "gemini-standin"}


def sse(data: Mapping[str, Any]) -> Iterator[bytes]:
    yield f"data: {json.dumps(data)}\r\n\r\n".encode()


def _handler_for(standin: GeminiStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # keep-alive like the real API: the CLI's HTTP client reuses connections
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
            self.end_headers()
            self.wfile.write(payload)

        def _json(self, data: Any, status: int = 200) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def do_POST(self) -> None:
            body = self._read_body()
            path = urlsplit(self.path).path.rstrip("/")
            endpoint = ENDPOINT.fullmatch(path)
            how = endpoint["how"] if endpoint else ""
            if how in ("generateContent", "streamGenerateContent") and isinstance(body, dict):
                stream = how == "streamGenerateContent"
                try:
                    data = standin.answer(self.path, body, stream)
                except Exception as exc:  # a bug in the stand-in must show, not hang the CLI
                    error = f"{self.path}: {type(exc).__name__}: {exc}"
                    standin._record(Exchange("POST", self.path, "error", stream, body=body), error)
                    self._json({"error": {"code": 500, "message": error, "status": "INTERNAL"}},
                               500)
                    return
                if stream:
                    self._send(200, b"".join(sse(data)), "text/event-stream")
                else:
                    self._json(data)
                return
            standin._record(Exchange("POST", self.path, "other", body=body))
            if how == "countTokens":
                self._json({"totalTokens": 10})
            else:
                self._json({})

        def do_GET(self) -> None:
            standin._record(Exchange("GET", self.path, "other"))
            self._json({"models": []} if urlsplit(self.path).path.rstrip("/").endswith("/models")
                       else {})

    return Handler

"""A stand-in OpenAI Responses API server, for running the real Codex CLI offline in tests.

Codex (0.169/0.171) POSTs every model request to `{base_url}/responses` and reads the answer
as server-sent events. The server is stateless, like the real API with `store: false`: each
request carries the whole conversation, so the turn's prompt and the tool results so far are
read from the request itself and handed to the brain (tests/standins/brain.py), whose next
action is rendered with the tools that request offers:

- code mode (0.171's and 0.169's default models): the tools arrive as an input item
  `{"type": "additional_tools"}`; the model's only shell access is a custom tool `exec` that
  runs JavaScript, in which `await tools.exec_command({cmd, yield_time_ms})` runs a command
  (and `tools.write_stdin` polls a command still running). A cell still running when `exec`
  yields is answered "Script running with cell ID N" and is polled with the function `wait`.
- flat tools (e.g. `-m gpt-5.1-codex`): a function `exec_command`, polled with `write_stdin`
  while it answers "Process running with session ID N".

Every action becomes one shell command whose output is one result for the brain: Read is
`cat`, Edit and Write a short Python program (Codex refuses `rm -f`/`rm -rf`, so nothing here
removes files), Shell `cd CWD && COMMAND`. Say ends the turn with an assistant message.

A second request per first turn asks for a thread title (`text.format` json_schema with a
`title` property); it gets a valid JSON title.
"""

from __future__ import annotations

import gzip
import itertools
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tests.standins import brain
from tests.standins.brain import Action, Edit, Read, Say, Shell, Write

Mind = Callable[[str, Sequence[str]], Action]

#: how long one poll of a running command may wait; Codex caps exec_command/write_stdin at 30 s
POLL_MS = 30000
#: Codex's status lines in front of a tool's output (code-mode cells and flat exec sessions)
HEADER_LINE = re.compile(r"^(Script |Chunk ID|Wall time|Process |Original token count|Total output lines"
                         r"|Exit code)")
CELL_RUNNING = re.compile(r"^Script running with cell ID (\S+)")
SESSION_RUNNING = re.compile(r"Process running with session ID (\d+)")
POLL_TOOLS = ("wait", "write_stdin")


@dataclass(frozen=True)
class Record:
    """One request as the stand-in saw and answered it."""

    method: str
    path: str
    #: "turn" (a model turn step), "title" (thread title side request), "error" (answered with an
    #: injected error) or "other" (any other endpoint)
    kind: str
    #: the turn's prompt (newest plain user message) for turn/error requests
    prompt: str | None = None
    #: the tool results since the prompt, one per action already carried out
    results: tuple[str, ...] = ()
    #: the brain's action, or None for a poll of a running command, a title or an error
    action: Action | None = None
    #: what went back: the shell command, "wait CELL", the final text, the title…
    sent: str = ""
    #: the plain user messages of the whole conversation, oldest first
    history: tuple[str, ...] = ()
    #: the tool the answer called ("exec", "exec_command", "wait", "write_stdin") or "message"
    via: str = "message"
    #: the developer messages Codex sent (its base prompt, developer_instructions, …)
    developer: tuple[str, ...] = ()


@dataclass
class _Failure:
    status: int
    body: dict[str, Any]
    #: how many more requests get it (None: until cleared)
    remaining: int | None


@dataclass
class _Chain:
    """One action's tool call and the polls of it: together they make one result."""

    text: str = ""
    #: ("wait", cell id) or ("write_stdin", session id) while the command is still running
    running: tuple[str, str] | None = None
    after_prompt: bool = False


class OpenAIStandIn:
    """Serve the Responses API on 127.0.0.1 (a free port) in a daemon thread.

        with OpenAIStandIn() as api:
            codex_home(home, api.base_url, [repo])
            … run codex …
            assert api.user_messages().count("Read and follow /abs/brief-1.md") == 1

    delay: seconds to wait before answering each turn request (keeps Codex visibly busy).
    yield_ms: how long a code-mode `exec` cell (or a flat `exec_command`) runs before it yields
    "Script running…" ("Process running…"); the stand-in then polls it with `wait`
    (`write_stdin`). Codex's own defaults are 30 s (cell) and 10 s (exec_command).
    """

    def __init__(self, *, mind: Mind = brain.next_action, delay: float = 0.0,
                 yield_ms: int = 10000) -> None:
        self.mind = mind
        self.delay = delay
        self.yield_ms = yield_ms
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._failure: _Failure | None = None
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        # daemon threads: a handler sleeping in `delay` or blocked on a vanished client never
        # holds up close()
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="openai-standin",
                                        daemon=True)
        self._started = False

    # -- life cycle -------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIStandIn:
        if not self._started:
            self._started = True
            self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        if self._started:
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> OpenAIStandIn:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- what tests read and steer ----------------------------------------------------------

    def records(self) -> list[Record]:
        with self._lock:
            return list(self._records)

    def turn_records(self) -> list[Record]:
        return [r for r in self.records() if r.kind == "turn"]

    def prompts(self) -> list[str]:
        """The prompt of every turn step that started a turn (no tool result yet), in order.

        A prompt Codex sent twice as two turns appears twice.
        """
        return [r.prompt for r in self.turn_records()
                if r.prompt is not None and not r.results and r.action is not None]

    def user_messages(self) -> list[str]:
        """The plain user messages of the newest conversation Codex sent, oldest first."""
        turns = [r for r in self.records() if r.kind in ("turn", "error")]
        return list(turns[-1].history) if turns else []

    def actions(self) -> list[Action]:
        return [r.action for r in self.turn_records() if r.action is not None]

    def fail(self, status: int, body: dict[str, Any], times: int | None = None) -> None:
        """Answer the next `times` model requests (all while None) with this HTTP error."""
        with self._lock:
            self._failure = _Failure(status, body, times)

    def heal(self) -> None:
        with self._lock:
            self._failure = None

    # -- answering --------------------------------------------------------------------------

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_standin{next(self._ids)}"

    def _log(self, record: Record) -> None:
        with self._lock:
            self._records.append(record)

    def _take_failure(self) -> _Failure | None:
        with self._lock:
            failure = self._failure
            if failure is not None and failure.remaining is not None:
                failure.remaining -= 1
                if failure.remaining <= 0:
                    self._failure = None
            return failure

    def answer(self, request: dict[str, Any]) -> tuple[Record, list[dict[str, Any]]]:
        """The output items for one /responses request, and its log record."""
        items = request.get("input")
        items = items if isinstance(items, list) else []
        if _is_title_request(request):
            title = _title(_title_prompt(items))
            message = self._message(json.dumps({"title": title}))
            return Record("POST", "/v1/responses", "title", sent=title), [message]
        history = tuple(_user_texts(items))
        prompt_at = _prompt_index(items)
        prompt = _user_text(items[prompt_at]) if prompt_at is not None else ""
        chains = _chains(items, prompt_at)
        results = tuple(c.text for c in chains if c.after_prompt)
        tools = _Tools.offered(request)
        pending = chains[-1].running if chains else None
        if pending is not None:
            call = tools.poll(self, *pending)
            return (Record("POST", "/v1/responses", "turn", prompt, results, None,
                           f"{pending[0]} {pending[1]}", history, pending[0]), [call])
        action = self.mind(prompt, results)
        if isinstance(action, Say):
            item, sent = self._message(action.text), action.text
        else:
            command = render(action)
            item, sent = tools.run(self, command), command
        via = str(item.get("name", "message"))
        developer = tuple(_user_text(i) for i in items
                          if isinstance(i, dict) and i.get("role") == "developer")
        return Record("POST", "/v1/responses", "turn", prompt, results, action, sent, history, via,
                      developer), [item]

    def _message(self, text: str) -> dict[str, Any]:
        return {"type": "message", "id": self._next_id("msg"), "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}


# -- reading a request ------------------------------------------------------------------------


def _is_title_request(request: dict[str, Any]) -> bool:
    text = request.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return False
    schema = fmt.get("schema")
    props = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(props, dict) and "title" in props


def _title_prompt(items: list[Any]) -> str:
    texts = [_user_text(i) for i in items if _is_user_message(i)]
    last = texts[-1] if texts else ""
    # the title request quotes the user's prompt after this line
    return last.split("User prompt:\n", 1)[-1]


def _title(prompt: str) -> str:
    match = brain.BRIEF.search(prompt)
    if match:
        return f"Follow {match.group(1).rsplit('/', 1)[-1]}"[:36]
    words = prompt.split()[:5] or ["Work"]
    return " ".join(words)[:36]


def _is_user_message(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type", "message") == "message" \
        and item.get("role") == "user"


def _user_text(item: Any) -> str:
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(part.get("text", "")) for part in content
                   if isinstance(part, dict) and part.get("type") in ("input_text", "text"))


def _is_plain(text: str) -> bool:
    """A message the user typed, not context Codex injects as a user message.

    Codex wraps its injections in tags (`<environment_context>`, `<user_instructions>`,
    `<turn_aborted>`, skills…) or, for AGENTS.md, a `# AGENTS.md instructions for …` header.
    """
    stripped = text.strip()
    if not stripped:
        return False
    if stripped.startswith("<") and stripped.endswith(">"):
        return False
    return not stripped.startswith("# AGENTS.md instructions")


def _user_texts(items: list[Any]) -> list[str]:
    return [t for t in (_user_text(i) for i in items if _is_user_message(i)) if _is_plain(t)]


def _prompt_index(items: list[Any]) -> int | None:
    for index in range(len(items) - 1, -1, -1):
        if _is_user_message(items[index]) and _is_plain(_user_text(items[index])):
            return index
    return None


def _output_text(item: dict[str, Any]) -> str:
    output = item.get("output")
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(str(part.get("text", "")) for part in output if isinstance(part, dict))
    if isinstance(output, dict):  # older shapes: {"content": "…"}
        return str(output.get("content", ""))
    return ""


def strip_header(text: str) -> str:
    """The command's own output: drop Codex's status lines up to `Output:`.

    Code mode: "Script completed\\nWall time 0.1 seconds\\nOutput:\\n…"; flat exec_command:
    "Chunk ID: …\\nWall time: …\\nProcess exited with code 0\\nOriginal token count: …\\nOutput:\\n…".
    """
    lines = text.split("\n")
    for index, line in enumerate(lines[:8]):
        if line == "Output:":
            if all(HEADER_LINE.match(h) for h in lines[:index]):
                return "\n".join(lines[index + 1:])
            break
    return text


def _running(name: str, text: str) -> tuple[str, str] | None:
    cell = CELL_RUNNING.match(text)
    if cell:
        return ("wait", cell.group(1))
    head = text.split("Output:\n", 1)[0]
    session = SESSION_RUNNING.search(head)
    if session and name in ("exec_command", "write_stdin"):
        return ("write_stdin", session.group(1))
    return None


def _chains(items: list[Any], prompt_at: int | None) -> list[_Chain]:
    """The tool calls of the conversation, polls folded into the call they poll."""
    outputs: dict[str, str] = {}
    for item in items:
        if isinstance(item, dict) and item.get("type") in ("function_call_output",
                                                           "custom_tool_call_output"):
            outputs[str(item.get("call_id"))] = _output_text(item)
    chains: list[_Chain] = []
    for index, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") not in ("function_call", "custom_tool_call"):
            continue
        name = str(item.get("name", ""))
        text = outputs.get(str(item.get("call_id")), "")
        running = _running(name, text)
        if name in POLL_TOOLS and chains:
            chain = chains[-1]
            chain.text += strip_header(text)
            chain.running = running
        else:
            after = prompt_at is not None and index > prompt_at
            chains.append(_Chain(strip_header(text), running, after))
    return chains


# -- rendering actions --------------------------------------------------------------------------


def render(action: Action) -> str:
    """The shell command that carries out a Read, Edit, Write or Shell action."""
    python = shlex.quote(sys.executable)  # absolute: the login shell may reset PATH
    if isinstance(action, Read):
        return f"cat -- {shlex.quote(action.path)}; echo handoff-exit=$?"
    if isinstance(action, Edit):
        program = (
            "import pathlib, sys\n"
            f"p = pathlib.Path({action.path!r}); t = p.read_text(encoding='utf-8'); old = {action.old!r}\n"
            "if old not in t: sys.exit(f'the text to replace is not in {p}')\n"
            f"p.write_text(t.replace(old, {action.new!r}, 1), encoding='utf-8'); print('edited', p)\n")
        return f"{python} -c {shlex.quote(program)}; echo handoff-exit=$?"
    if isinstance(action, Write):
        program = (
            "import pathlib\n"
            f"p = pathlib.Path({action.path!r}); p.parent.mkdir(parents=True, exist_ok=True)\n"
            f"p.write_text({action.content()!r}, encoding='utf-8'); print('wrote', p)\n")
        return f"{python} -c {shlex.quote(program)}; echo handoff-exit=$?"
    if isinstance(action, Shell):
        return f"cd {shlex.quote(action.cwd)} && {action.command}"
    raise TypeError(f"not a tool action: {action!r}")


def exec_script(command: str, yield_ms: int) -> str:
    """JavaScript for code mode's `exec`: run command, polling its session until it exits."""
    return (
        f"// @exec: {json.dumps({'yield_time_ms': yield_ms})}\n"
        f"const cmd = {json.dumps(command)};\n"
        "let out = \"\";\n"
        "try {\n"
        f"  let r = await tools.exec_command({{cmd, yield_time_ms: {POLL_MS}}});\n"
        "  out += r.output ?? \"\";\n"
        "  while (r.exit_code === undefined && r.session_id !== undefined) {\n"
        "    r = await tools.write_stdin({session_id: r.session_id, chars: \"\", "
        f"yield_time_ms: {POLL_MS}}});\n"
        "    out += r.output ?? \"\";\n"
        "  }\n"
        "} catch (e) {\n"
        "  out += \"\\nexec_command failed: \" + String(e);\n"
        "}\n"
        "text(out);\n")


class _Tools:
    """The shell tools one request offers, and how to call them."""

    def __init__(self, code_mode: bool, flat: bool) -> None:
        self.code_mode = code_mode
        self.flat = flat

    @classmethod
    def offered(cls, request: dict[str, Any]) -> _Tools:
        names: set[tuple[str, str]] = set()
        declared = ""
        sources: list[Any] = list(request.get("tools") or [])
        for item in request.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "additional_tools":
                sources += item.get("tools") or []
        for tool in _walk_tools(sources):
            names.add((str(tool.get("type")), str(tool.get("name"))))
            if tool.get("name") == "exec":
                declared += str(tool.get("description", ""))
        code_mode = ("custom", "exec") in names and "exec_command(" in declared
        return cls(code_mode, ("function", "exec_command") in names)

    def run(self, api: OpenAIStandIn, command: str) -> dict[str, Any]:
        if self.code_mode:
            return {"type": "custom_tool_call", "id": api._next_id("ctc"),
                    "call_id": api._next_id("call"), "name": "exec", "status": "completed",
                    "input": exec_script(command, api.yield_ms)}
        if self.flat:
            # yield_ms, like a code-mode cell's yield: a longer command is polled with write_stdin
            return _function_call(api, "exec_command", {"cmd": command, "yield_time_ms": api.yield_ms})
        return api._message("I have no shell tool (neither code-mode exec nor exec_command).")

    def poll(self, api: OpenAIStandIn, tool: str, ident: str) -> dict[str, Any]:
        if tool == "wait":
            return _function_call(api, "wait", {"cell_id": ident, "yield_time_ms": POLL_MS})
        return _function_call(api, "write_stdin",
                              {"session_id": int(ident), "chars": "", "yield_time_ms": POLL_MS})


def _walk_tools(tools: list[Any]) -> Iterator[dict[str, Any]]:
    for tool in tools:
        if isinstance(tool, dict):
            yield tool
            if tool.get("type") == "namespace":
                yield from _walk_tools(list(tool.get("tools") or []))


def _function_call(api: OpenAIStandIn, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function_call", "id": api._next_id("fc"), "call_id": api._next_id("call"),
            "name": name, "arguments": json.dumps(arguments), "status": "completed"}


# -- the wire ---------------------------------------------------------------------------------


def _events(response_id: str, model: str, items: list[dict[str, Any]],
            input_tokens: int) -> Iterator[dict[str, Any]]:
    """The SSE events of one streamed response, as the Responses API orders them."""
    created = int(time.time())
    base = {"id": response_id, "object": "response", "created_at": created, "model": model}
    yield {"type": "response.created", "response": {**base, "status": "in_progress", "output": []}}
    yield {"type": "response.in_progress", "response": {**base, "status": "in_progress", "output": []}}
    output_tokens = 0
    for index, item in enumerate(items):
        kind = item["type"]
        ident = item["id"]
        if kind == "message":
            text = item["content"][0]["text"]
            output_tokens += len(text) // 4 + 1
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "content": []}}
            part = {"type": "output_text", "text": "", "annotations": []}
            yield {"type": "response.content_part.added", "item_id": ident, "output_index": index,
                   "content_index": 0, "part": part}
            for chunk in _chunks(text):
                yield {"type": "response.output_text.delta", "item_id": ident, "output_index": index,
                       "content_index": 0, "delta": chunk}
            yield {"type": "response.output_text.done", "item_id": ident, "output_index": index,
                   "content_index": 0, "text": text}
            yield {"type": "response.content_part.done", "item_id": ident, "output_index": index,
                   "content_index": 0, "part": {**part, "text": text}}
        elif kind == "custom_tool_call":
            output_tokens += len(item["input"]) // 4 + 1
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "input": ""}}
            for chunk in _chunks(item["input"]):
                yield {"type": "response.custom_tool_call_input.delta", "item_id": ident,
                       "output_index": index, "delta": chunk}
            yield {"type": "response.custom_tool_call_input.done", "item_id": ident,
                   "output_index": index, "input": item["input"]}
        elif kind == "function_call":
            output_tokens += len(item["arguments"]) // 4 + 1
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "status": "in_progress", "arguments": ""}}
            for chunk in _chunks(item["arguments"]):
                yield {"type": "response.function_call_arguments.delta", "item_id": ident,
                       "output_index": index, "delta": chunk}
            yield {"type": "response.function_call_arguments.done", "item_id": ident,
                   "output_index": index, "arguments": item["arguments"]}
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": input_tokens + output_tokens}
    yield {"type": "response.completed",
           "response": {**base, "status": "completed", "output": items, "usage": usage}}


def _chunks(text: str, size: int = 200) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def _decode(body: bytes, encoding: str | None) -> bytes:
    """Codex may compress request bodies (it advertises zstd,gzip for responses)."""
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "zstd":
        zstd = shutil.which("zstd")
        if zstd is None:
            raise ValueError("a zstd request body and no zstd binary to read it")
        return subprocess.run([zstd, "-d", "-c"], input=body, capture_output=True, check=True,
                              timeout=30).stdout
    return body


def _handler(api: OpenAIStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the request log is api.records(); stderr noise helps nobody

        def _json(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            raw = _decode(self.rfile.read(length), self.headers.get("Content-Encoding"))
            data = json.loads(raw or b"{}")
            return data if isinstance(data, dict) else {}

        def do_GET(self) -> None:
            api._log(Record("GET", self.path, "other"))
            # e.g. /v1/models: an empty list makes Codex keep its built-in model metadata
            self._json(200, {"object": "list", "data": [], "models": []})

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                request = self._body()
            except (ValueError, subprocess.SubprocessError) as exc:
                api._log(Record("POST", path, "other", sent=f"400 {exc}"))
                self._json(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
                return
            if not path.endswith("/responses"):
                api._log(Record("POST", path, "other", sent="200 {}"))
                # e.g. /responses/compact: nothing to offer, but never an error Codex retries
                self._json(200, {"object": "response.compaction", "output": []})
                return
            failure = api._take_failure()
            if failure is not None:
                items = request.get("input")
                items = items if isinstance(items, list) else []
                at = _prompt_index(items)
                api._log(Record("POST", path, "error", _user_text(items[at]) if at is not None else None,
                                sent=f"{failure.status} {json.dumps(failure.body)}",
                                history=tuple(_user_texts(items))))
                self._json(failure.status, failure.body)
                return
            try:
                record, items = api.answer(request)
            except Exception as exc:  # a bug in the stand-in must show, not hang Codex
                api._log(Record("POST", path, "error", sent=f"500 {exc!r}"))
                self._json(500, {"error": {"message": f"stand-in failed: {exc!r}",
                                           "type": "server_error"}})
                raise
            api._log(record)
            self._stream(request, items)

        def _stream(self, request: dict[str, Any], items: list[dict[str, Any]]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            input_tokens = int(self.headers.get("Content-Length") or 0) // 4
            events = _events(api._next_id("resp"), str(request.get("model", "stand-in")), items,
                             input_tokens)
            try:
                for number, event in enumerate(events):
                    if event["type"] == "response.in_progress" and api.delay:
                        self.wfile.flush()
                        if api._stopping.wait(api.delay):
                            return
                    event["sequence_number"] = number
                    self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass  # Codex gave up on this stream (interrupted turn, exit): nothing to do

    return Handler

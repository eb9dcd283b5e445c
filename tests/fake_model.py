"""A scripted fake OpenAI-compatible model server: real HTTP on 127.0.0.1, answers from a queue."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Raw:
    """An HTTP answer sent as is: any status, any bytes."""

    status: int
    body: bytes = b""
    content_type: str = "application/json"


@dataclass(frozen=True)
class Hang:
    """Accept the request and send nothing for `seconds` (or until the server stops)."""

    seconds: float = 30.0


@dataclass(frozen=True)
class Trickle:
    """Answer 200 at once, then send the body one byte every `interval` seconds."""

    body: bytes
    interval: float = 0.2


@dataclass(frozen=True)
class TrickleChunkSize:
    """Answer 200 chunked, then send a chunk-size line one byte every `interval` seconds, never ending it.

    The client's HTTP library reads that line whole before it hands any byte back, so only a deadline that
    shuts the socket can end the read.
    """

    interval: float = 0.05


@dataclass
class ModelRequest:
    """One request the fake received: the path, headers and decoded JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes = field(repr=False, default=b"")

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def last(self, role: str) -> dict[str, Any] | None:
        """The last message of that role."""
        return next((m for m in reversed(self.messages) if m.get("role") == role), None)


# --- building answers --------------------------------------------------------------------------

def completion(message: Mapping[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    """A chat.completion body around one assistant message."""
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def text(content: str) -> dict[str, Any]:
    """The model answers in words."""
    return completion({"content": content})


def tool_call(function: str, arguments: Any = None, *, call_id: str = "call_1") -> dict[str, Any]:
    """The model calls one function; dict arguments are JSON-encoded, a str is sent verbatim."""
    return tool_calls((function, arguments, call_id))


def tool_calls(*calls: tuple[str, Any, str]) -> dict[str, Any]:
    """The model calls several functions in one message: (function, arguments, call id) each."""
    encoded = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args or {})},
        }
        for name, args, call_id in calls
    ]
    return completion({"content": None, "tool_calls": encoded}, "tool_calls")


def status(code: int, payload: Any = None) -> Raw:
    """An HTTP error, with an OpenAI-style error body."""
    body = payload if payload is not None else {"error": {"message": f"fake error {code}", "code": code}}
    return Raw(code, json.dumps(body).encode())


def answer_from_tool_result(request: dict[str, Any]) -> dict[str, Any]:
    """A step that reads the last tool result and answers with it, as a real model would summarise."""
    last_tool = next((m for m in reversed(request.get("messages", [])) if m.get("role") == "tool"), None)
    if last_tool is None:
        return text("I have no reading to report.")
    result = json.loads(last_tool["content"])
    if "error" in result:
        return text(f"I could not read that: {result['error']['code']}.")
    lines = [
        f"{e['friendly_name']} is {e['state']}{' ' + e['unit_of_measurement'] if e.get('unit_of_measurement') else ''}."
        for e in result.get("entities", [])
    ]
    if "summary" in result or "changes" in result:
        lines.append(f"{result.get('friendly_name', result.get('entity_id'))} changed "
                     f"{result.get('total_changes', 0)} times over the past {result.get('period')}.")
    return text(" ".join(lines) or "Nothing to report.")


# --- the server --------------------------------------------------------------------------------

class FakeModel:
    """A context manager serving /v1/chat/completions from a script; records every request.

    A step is a chat-completion body (see `text`, `tool_call`), a `Raw` HTTP answer, a `Hang`, or a
    function of the request body returning one of those.
    """

    def __init__(self, script: Iterable[Any] = (), *, fallback: Any = None,
                 models: Any = ("fake-model",)) -> None:
        self._script: deque[Any] = deque(script)
        # What GET /v1/models answers: model ids (listed in OpenAI's form), or a Raw, Hang or Trickle.
        self.models = models
        # Answered when the script is empty; None means an HTTP 500 that names the cause.
        self.fallback = fallback
        self.requests: list[ModelRequest] = []
        # How many chat requests a `Hang` holds now: a client that gave up leaves its hang held.
        self.hanging = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to set as CONSOLE_HA_LLM_URL (ending in /v1)."""
        assert self._server is not None, "start the fake model first"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def script(self, *steps: Any) -> FakeModel:
        """Append steps to the queue of answers."""
        with self._lock:
            self._script.extend(steps)
        return self

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def seen(self) -> str:
        """Every request body the fake received, as one text, for asserting what never reached the model."""
        return "\n".join(r.raw.decode("utf-8", "replace") for r in self.requests)

    def __enter__(self) -> FakeModel:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # Headers and body are two small writes: without this, Nagle waits on a delayed ACK (40 ms).
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _trickle(self, data: bytes, interval: float) -> None:
                """Send `data` a byte at a time, `interval` apart, until done, stopped or hung up; then close."""
                for byte in data:
                    if fake._stopping.wait(interval):
                        break
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:
                        break
                self.close_connection = True

            def do_GET(self) -> None:
                request = ModelRequest(self.path, dict(self.headers.items()), {})
                with fake._lock:
                    fake.requests.append(request)
                    answer = fake.models
                if self.path != "/v1/models":
                    self._send(Raw(404, b'{"error":"not found"}'))
                elif isinstance(answer, Hang):
                    fake._stopping.wait(answer.seconds)
                    self.close_connection = True
                elif isinstance(answer, Raw):
                    self._send(answer)
                else:
                    listing = {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "fake"}
                                                          for name in answer]}
                    self._send(Raw(200, json.dumps(listing).encode()))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                request = ModelRequest(self.path, dict(self.headers.items()), body, raw)
                with fake._lock:
                    fake.requests.append(request)
                    step = fake._script.popleft() if fake._script else fake.fallback
                if self.path != "/v1/chat/completions":
                    self._send(Raw(404, b'{"error":"not found"}'))
                    return
                if step is None:
                    step = Raw(500, b'{"error":"the fake model has no scripted answer left"}')
                if callable(step) and not isinstance(step, (Raw, Hang, Trickle, TrickleChunkSize)):
                    step = step(body)
                if isinstance(step, TrickleChunkSize):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    self._trickle(b"1;" + b"x" * 60_000, step.interval)
                    return
                if isinstance(step, Trickle):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(step.body)))
                    self.end_headers()
                    self._trickle(step.body, step.interval)
                    return
                if isinstance(step, Hang):
                    with fake._lock:
                        fake.hanging += 1
                    fake._stopping.wait(step.seconds)
                    with fake._lock:
                        fake.hanging -= 1
                    self.close_connection = True
                    return
                if not isinstance(step, Raw):
                    step = Raw(200, json.dumps(step).encode())
                self._send(step)

            def _send(self, answer: Raw) -> None:
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-model", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stopping.set()
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def unused_loopback_url() -> str:
    """A /v1 URL on 127.0.0.1 where nothing listens: a model that is down."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"

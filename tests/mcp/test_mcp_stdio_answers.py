"""`console-ha mcp --url URL` against a URL that is no MCP server: it says what it found and exits 2, in time.

The probe (issue 25) found the command hanging when the URL answered `200 []`, `200 {}` or an HTML page: it
never answered the host's `initialize`, and kept running after its stdin closed. Each test here runs the real
command in a subprocess against a loopback server answering one shape (or a real Console), with a bound on
how long it may take.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any

import httpx
import mcp.types as types
import pytest
from pydantic import ValidationError

from console_ha.mcp.stdio import INITIALIZE_TIMEOUT_SECONDS, Upstream
from tests.async_run import run_to_end
from tests.mcp.conftest import ServedConsole

# A shape must be told apart at once: the command's own start (Python, the SDK) is most of this.
BOUND_SECONDS = 8.0
INITIALIZE = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
AN_INITIALIZE_RESULT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "impostor", "version": "1"}}


@dataclass(frozen=True)
class Shape:
    """What the loopback server answers to every POST: a status, a content type and a body."""

    status: int
    content_type: str
    body: bytes


@dataclass
class Answering:
    """A loopback HTTP server answering `shape` (or, with `first`, that to the first POST), and what it heard."""

    shape: Shape
    first: Shape | None = None
    posts: list[dict[str, Any]] = field(default_factory=list)


def _handler(answering: Answering) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            answering.posts.append(json.loads(body))
            shape = answering.first if answering.first is not None and len(answering.posts) == 1 \
                else answering.shape
            self._answer(shape)

        def do_GET(self) -> None:
            self._answer(Shape(405, "text/plain", b""))

        do_DELETE = do_GET

        def _answer(self, shape: Shape) -> None:
            self.send_response(shape.status)
            self.send_header("Content-Type", shape.content_type)
            self.send_header("Content-Length", str(len(shape.body)))
            self.send_header("Mcp-Session-Id", "s1")
            self.end_headers()
            self.wfile.write(shape.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def answering() -> Iterator[Callable[..., tuple[str, Answering]]]:
    """Start loopback servers answering a shape; their URLs, and what each heard."""
    servers: list[ThreadingHTTPServer] = []

    def start(shape: Shape, first: Shape | None = None) -> tuple[str, Answering]:
        state = Answering(shape, first)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
        threading.Thread(target=server.serve_forever, name="answering", daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", state

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def start_command(url: str) -> subprocess.Popen[str]:
    """The real command, as a host starts it: stdin and stdout are the host's pipes."""
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": "cha_probe_token", "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    return subprocess.Popen([sys.executable, "-m", "console_ha", "mcp", "--url", url], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def say(stdin: IO[str] | None, *messages: dict[str, Any]) -> None:
    assert stdin is not None
    for message in messages:
        stdin.write(json.dumps(message) + "\n")
    stdin.flush()


def ended_within(command: subprocess.Popen[str], seconds: float) -> tuple[int, str, str, float]:
    """Wait for the command to exit on its own (the host keeps stdin open): status, stdout, stderr, seconds."""
    started = time.monotonic()
    try:
        status = command.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        command.kill()
        command.communicate()
        pytest.fail(f"the command was still running after {seconds} s")
    took = time.monotonic() - started
    assert command.stdout is not None and command.stderr is not None
    out, err = command.stdout.read(), command.stderr.read()
    if command.stdin is not None:
        command.stdin.close()
    return status, out, err, took


NOT_MCP = [
    (Shape(200, "application/json", b"[]"), "200 (application/json)"),
    (Shape(200, "application/json", b"{}"), "200 (application/json)"),
    (Shape(200, "text/html; charset=utf-8", b"<!doctype html><title>Router</title>"),
     "200 (text/html; charset=utf-8)"),
    (Shape(200, "application/json", json.dumps({"jsonrpc": "2.0", "id": 0, "result": {}}).encode()),
     "200 (application/json)"),
    (Shape(200, "text/event-stream", b"event: message\ndata: [1, 2]\n\n"), "200 (text/event-stream)"),
]


@pytest.mark.parametrize(("shape", "found"), NOT_MCP,
                         ids=["json-list", "json-object", "html", "json-rpc-not-mcp", "event-stream-not-mcp"])
def test_an_answer_that_is_no_mcp_servers_is_named_and_the_command_exits_2(answering, shape: Shape,
                                                                           found: str) -> None:
    url, heard = answering(shape)
    command = start_command(url)
    say(command.stdin, INITIALIZE)
    status, out, err, took = ended_within(command, BOUND_SECONDS)
    assert status == 2, err
    assert f"it answered {found}, which is not an MCP server's answer" in err
    assert f"Is {url}/mcp the Console's address?" in err
    assert out == "" and "cha_probe_token" not in err
    assert heard.posts and heard.posts[0]["method"] == "initialize"
    # What the household reads is the command's sentence: no traceback of the SDK's (the acceptance of issue 25
    # found 20-40 lines of pydantic's validation errors above it for `200 []` and `200 {}`).
    assert "Traceback" not in err and "validation error" not in err, err


def test_a_json_rpc_server_that_refuses_initialize_is_named_with_its_reason(answering) -> None:
    """JSON-RPC, but not MCP: the error it answers `initialize` with is quoted (printable characters only)."""
    refusal = {"jsonrpc": "2.0", "id": 0, "error": {"code": -32601, "message": "Method not found\x1b[2J"}}
    url, _ = answering(Shape(200, "application/json", json.dumps(refusal).encode()))
    command = start_command(url)
    say(command.stdin, INITIALIZE)
    status, out, err, _ = ended_within(command, BOUND_SECONDS)
    assert status == 2 and out == ""
    assert "it refused MCP's first request: Method not found[2J" in err and "\x1b" not in err


def test_a_url_that_never_answers_the_first_request_is_left_after_the_bound(answering) -> None:
    """202 to `initialize` is no answer at all: the command gives up after INITIALIZE_TIMEOUT_SECONDS."""
    url, _ = answering(Shape(202, "application/json", b""))
    command = start_command(url)
    say(command.stdin, INITIALIZE)
    status, out, err, took = ended_within(command, INITIALIZE_TIMEOUT_SECONDS + BOUND_SECONDS)
    assert status == 2 and out == ""
    assert f"it did not answer MCP's first request within {INITIALIZE_TIMEOUT_SECONDS:g} seconds" in err
    # Real time: the command's own timer, in its own process.
    assert took >= INITIALIZE_TIMEOUT_SECONDS - 1


def test_the_command_stops_when_stdin_closes_even_while_the_url_answers_nonsense(answering) -> None:
    """The probe's way in: `echo initialize | console-ha mcp --url …` against a URL answering `200 []`."""
    url, _ = answering(Shape(200, "application/json", b"[]"))
    command = start_command(url)
    say(command.stdin, INITIALIZE)
    assert command.stdin is not None
    command.stdin.close()
    command.stdin = None
    status, _, err, _ = ended_within(command, BOUND_SECONDS)
    assert status == 2 and "not an MCP server's answer" in err


def test_nonsense_after_a_good_start_ends_the_command_too(answering) -> None:
    """A URL that answers `initialize` as MCP and `tools/list` with an HTML page: that request could never end."""
    url, heard = answering(
        Shape(200, "text/html", b"<html>maintenance</html>"),
        first=Shape(200, "application/json",
                    json.dumps({"jsonrpc": "2.0", "id": 0, "result": AN_INITIALIZE_RESULT}).encode()))
    command = start_command(url)
    say(command.stdin, INITIALIZE, INITIALIZED, LIST_TOOLS)
    status, out, err, _ = ended_within(command, BOUND_SECONDS)
    assert status == 2 and "it answered 200 (text/html), which is not an MCP server's answer" in err
    assert [post.get("method") for post in heard.posts][:1] == ["initialize"]


def test_with_a_real_console_the_command_answers_and_exits_when_stdin_closes(console: ServedConsole,
                                                                              api_token: str) -> None:
    """The same handshake against a Console works, and closing stdin ends the command with status 0."""
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": api_token, "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    command = subprocess.Popen([sys.executable, "-m", "console_ha", "mcp", "--url", console.url], env=env,
                               text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    say(command.stdin, INITIALIZE)
    assert command.stdout is not None and command.stdin is not None
    answer = json.loads(command.stdout.readline())
    assert answer["id"] == 0 and answer["result"]["serverInfo"]["name"] == "console-ha"
    command.stdin.close()
    command.stdin = None
    status, _, err, _ = ended_within(command, BOUND_SECONDS)
    assert status == 0, err


def test_only_an_answer_mcp_cannot_read_counts_as_nonsense_not_a_late_answer_to_a_cancelled_call() -> None:
    """MCP says a late answer to a cancelled request is ignored: the SDK hands it over as a RuntimeError."""

    async def garbled_after(message: Exception) -> bool:
        async with httpx.AsyncClient() as http:
            upstream = Upstream("http://127.0.0.1:9/mcp", http)
            await upstream._on_message(message)
            return upstream._garbled.is_set()

    try:
        types.JSONRPCMessage.model_validate_json(b"[]")
    except ValidationError as err:
        not_json_rpc: Exception = err
    assert run_to_end(garbled_after(not_json_rpc))
    assert run_to_end(garbled_after(ValueError("Unexpected content type: text/html")))
    assert not run_to_end(garbled_after(RuntimeError("Received response with an unknown request ID: 7")))
    assert not run_to_end(garbled_after(httpx.ReadError("connection reset")))

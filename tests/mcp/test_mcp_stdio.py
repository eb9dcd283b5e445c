"""`console-ha mcp --url URL`, spawned through the SDK's own stdio client, forwarding to a served Console."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jsonschema
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from console_ha.mcp.server import tool_name
from console_ha.store.console_secrets import ConsoleSecrets
from tests.mcp.conftest import CLIENT_NAME
from tests.mcp.sdk_clients import ts_sdk_installed
from tests.mcp.test_mcp_http import (
    ENTITY,
    HISTORY,
    LIST,
    audit_events,
    error_of,
    household_answers,
    pending_cards,
    run,
    text_of,
)

PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")

# What a Console whose allowlist holds no calendar, list or weather lists (issue 28: a read is offered only
# where an allowlisted entity can answer it).
LISTED = {tool_name(c) for c in REGISTRY.values() if c.answers_for is None}


def command(url: str, token: str, **environ: str) -> StdioServerParameters:
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": token, **environ}
    return StdioServerParameters(command=sys.executable, args=["-m", "console_ha", "mcp", "--url", url], env=env)


def test_the_stdio_command_reads_history_only_after_the_household_approves(console, api_token, household, stub_ha):
    console.configure(stub_ha.base_url, stub_ha.token)
    notifications: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        # The parameter names are the SDK's ProgressFnT protocol's.
        notifications.append(message)

    async def scenario() -> tuple[list[types.Tool], types.CallToolResult, types.CallToolResult, dict[str, Any]]:
        async with stdio_client(command(console.url, api_token)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            tools = (await session.list_tools()).tools
            refused = await session.call_tool(HISTORY, {"entity_id": "lock.front_door", "period": "day"})
            call = asyncio.create_task(session.call_tool(HISTORY, {"entity_id": ENTITY, "period": "week"},
                                                         progress_callback=on_progress))
            card = (await pending_cards(console, household))[0]
            assert stub_ha.requests_to("/api/history") == []
            await household_answers(console, household, card["token"], True)
            return tools, refused, await asyncio.wait_for(call, 20), card

    tools, refused, result, card = run(scenario)
    assert {tool.name for tool in tools} == LISTED >= {LIST, HISTORY}
    assert error_of(refused)["code"] == "ENTITY_NOT_ALLOWLISTED"
    assert card["client"] == CLIENT_NAME
    assert result.isError is False
    jsonschema.validate(result.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    assert result.structuredContent["period"] == "week"
    assert notifications and console.url + "/confirmations" in (notifications[0] or "")


def test_cancelling_through_the_stdio_command_withdraws_the_card(console, api_token, household, stub_ha):
    console.configure(stub_ha.base_url, stub_ha.token)

    async def scenario() -> None:
        async with stdio_client(command(console.url, api_token)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            call = asyncio.create_task(session.call_tool(LIST, {}))
            await pending_cards(console, household)
            await session.send_notification(types.ClientNotification(types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=session._request_id - 1))))
            await pending_cards(console, household, count=0)
            call.cancel()

    run(scenario)
    assert stub_ha.requests_to("/api/states") == []


def test_without_a_token_or_with_a_wrong_one_the_command_says_why_and_exits(console):
    env = {k: v for k, v in os.environ.items() if k != "CONSOLE_HA_API_TOKEN"}
    missing = subprocess.run([sys.executable, "-m", "console_ha", "mcp", "--url", console.url], env=env,
                             capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert missing.returncode == 2 and "CONSOLE_HA_API_TOKEN" in missing.stderr
    wrong = subprocess.run([sys.executable, "-m", "console_ha", "mcp", "--url", console.url],
                           env={**env, "CONSOLE_HA_API_TOKEN": "not-a-token"},
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert wrong.returncode == 2 and "was not accepted" in wrong.stderr
    assert "not-a-token" not in wrong.stderr


def test_the_stdio_command_opens_a_new_session_once_the_console_has_ended_its_idle_one(make_console, api_token,
                                                                                      monkeypatch):
    """A host keeps the command running for days; the Console ends idle sessions (after 30 minutes)."""
    import console_ha.web.mcp_endpoint as web_mcp

    monkeypatch.setattr(web_mcp, "SESSION_IDLE_SECONDS", 1.0)
    console = make_console()

    async def scenario() -> tuple[list[types.Tool], types.CallToolResult, types.CallToolResult]:
        async with stdio_client(command(console.url, api_token)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert len((await session.list_tools()).tools) == len(LISTED)
            await asyncio.sleep(3)  # the Console's session idles out
            tools = (await asyncio.wait_for(session.list_tools(), 20)).tools
            first = await asyncio.wait_for(session.call_tool(LIST, {}), 20)
            await asyncio.sleep(3)  # and again, now with two requests finding it gone at once
            both = await asyncio.wait_for(asyncio.gather(session.list_tools(), session.call_tool(LIST, {})), 20)
            return tools, first, both[1]

    tools, refused, refused_again = run(scenario)
    assert {tool.name for tool in tools} == LISTED >= {LIST, HISTORY}
    assert error_of(refused)["code"] == "CAPABILITY_DISABLED"
    assert error_of(refused_again)["code"] == "CAPABILITY_DISABLED"


class RecordingProxy(BaseHTTPRequestHandler):
    """A proxy that forwards nothing: it notes each request line and whether a token came, and answers 502."""

    heard: list[str]

    def handle_one_request(self) -> None:
        self.raw_requestline = self.rfile.readline(65537)
        if not self.raw_requestline or not self.parse_request():
            return
        # What came, but never the token itself, which a failing assertion would print.
        self.heard.append(f"{self.requestline} (Authorization: {'Authorization' in self.headers})")
        self.send_response(502)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def recording_proxy(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[str]]]:
    """A recording proxy on loopback: its URL in the form asked for, and what it heard."""
    host, named = request.param
    heard: list[str] = []
    server = ThreadingHTTPServer((host, 0), type("Recording", (RecordingProxy,), {"heard": heard}))
    thread = threading.Thread(target=server.serve_forever, name="recording-proxy", daemon=True)
    thread.start()
    yield f"http://{named}:{server.server_address[1]}", heard
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("recording_proxy", [("127.0.0.1", "localhost"), ("127.0.0.2", "127.0.0.2")],
                         ids=["localhost", "127.0.0.2"], indirect=True)
def test_the_stdio_command_sends_its_token_to_no_proxy_from_its_environment(console, api_token, recording_proxy):
    """The forwarder talks to its --url only: a proxy in the environment would receive the API token."""
    proxy, heard = recording_proxy
    environ = {name: proxy for name in PROXY_VARIABLES} | {"NO_PROXY": "", "no_proxy": ""}

    async def scenario() -> list[types.Tool]:
        async with stdio_client(command(console.url, api_token, **environ)) as (read, write), \
                ClientSession(read, write) as session:
            await asyncio.wait_for(session.initialize(), 20)
            return (await asyncio.wait_for(session.list_tools(), 20)).tools

    try:
        tools = run(scenario)
    finally:
        assert heard == [], f"the proxy was sent: {heard}"
    assert {tool.name for tool in tools} == LISTED >= {LIST, HISTORY}


def test_the_stdio_command_still_trusts_a_household_ca_named_in_ssl_cert_file(tmp_path, monkeypatch):
    """Ignoring the environment's proxies must not drop the certificate authority a household points it at."""
    from console_ha.mcp.stdio import console_client
    from tests.certs import make_ca

    ca = tmp_path / "household-ca.pem"
    ca.write_text(make_ca(tmp_path / "tls").ca_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))

    async def authorities() -> list[str]:
        async with console_client("token") as http:
            # httpx's private transport internals: the only place the client's SSL context can be read.
            context = http._transport._pool._ssl_context  # type: ignore[attr-defined]
            return [str(cert["subject"]) for cert in context.get_ca_certs()]

    assert any("Test household CA" in subject for subject in run(authorities))


def test_waiting_for_household_passes_through_the_stdio_command_and_the_same_call_again_collects_it(
    console, data_dir, household, stub_ha
):
    """Issue 20's early return through the forwarder: as the Console sent it, not an error; calling again with
    the same arguments joins the same card (no new one) and, once allowed, gets the read."""
    patience = 2
    token = ConsoleSecrets(data_dir).create_api_token(CLIENT_NAME, patience=patience)
    console.configure(stub_ha.base_url, stub_ha.token)
    arguments = {"entity_id": ENTITY, "period": "day"}

    async def scenario() -> tuple[list[types.CallToolResult], list[dict[str, Any]], list[float], dict[str, Any]]:
        async with stdio_client(command(console.url, token)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            (tool,) = [t for t in (await session.list_tools()).tools if t.name == HISTORY]
            assert tool.outputSchema is not None
            results: list[types.CallToolResult] = []
            cards: list[dict[str, Any]] = []
            seconds: list[float] = []
            for _ in range(2):  # unanswered: each call returns early, the second joining the first one's card
                started = time.monotonic()
                results.append(await asyncio.wait_for(session.call_tool(HISTORY, arguments), patience + 20))
                seconds.append(time.monotonic() - started)
                cards += await pending_cards(console, household)
            assert stub_ha.requests_to("/api/history") == []
            assert (await household_answers(console, household, cards[0]["token"], True)).status_code == 200
            # Different key order, the same arguments (compared as canonical JSON).
            results.append(await asyncio.wait_for(session.call_tool(HISTORY, dict(reversed(arguments.items()))),
                                                  20))
            return results, cards, seconds, tool.outputSchema

    (first, again, collected), cards, seconds, output_schema = run(scenario)
    assert cards[0]["token"] == cards[1]["token"]  # one card, joined
    for early, took in ((first, seconds[0]), (again, seconds[1])):
        assert early.isError is False
        assert set(early.structuredContent) == {"waiting_for_household"}
        waiting = early.structuredContent["waiting_for_household"]
        assert set(waiting) == {"message", "expires_at"} and waiting["expires_at"] == cards[0]["expires_at"]
        assert "same call again" in waiting["message"] and console.url + "/confirmations" in waiting["message"]
        assert json.loads(text_of(early)) == early.structuredContent  # the text is the same JSON, unchanged
        jsonschema.validate(early.structuredContent, output_schema)  # as the SDK's client checks it
        # Real time: the patience of a call made by a real client in its own process.
        assert took < patience + 5
    assert collected.isError is False
    jsonschema.validate(collected.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    assert collected.structuredContent["entity_id"] == ENTITY
    assert len(stub_ha.requests_to("/api/history")) == 1  # read once, for the call that collected it
    events = [e["event"] for e in audit_events(console) if e["capability"] == "home_assistant.get_history"]
    assert events.count("confirmation_requested") == 1 and events.count("executed") == 1, events


def test_the_typescript_sdks_stdio_client_lists_sends_a_large_message_and_cancels(console, api_token, household,
                                                                                  stub_ha):
    """The official TypeScript SDK's stdio client through the command: the tools, a 300 KB message, a cancel."""
    console.configure(stub_ha.base_url, stub_ha.token)
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": api_token, "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    program = subprocess.Popen(["node", "stdio_session.mjs", sys.executable, console.url, LIST], env=env,
                               cwd=ts_sdk_installed(), text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert program.stdout is not None and program.stdin is not None
        step = lambda: json.loads(program.stdout.readline() or "null")  # noqa: E731
        assert set(step()["tools"]) == LISTED
        # Over the Console's bound: answered by the command, which goes on (the Console's 413 ended it before).
        assert step() == {"large": True, "code": "PAYLOAD_TOO_LARGE"}
        assert step() == {"large": True, "code": "INVALID_ARGUMENTS"}  # under it: the Console's own answer
        assert step() == {"waiting": True}
        run(lambda: pending_cards(console, household))
        program.stdin.write("cancel\n")
        program.stdin.flush()
        assert step()["cancelled"] != "answered"  # the SDK rejects the call (an McpError naming the abort)
        # The program closes at once (stdin too): the Console still heard of the cancel, and the card went.
        run(lambda: pending_cards(console, household, count=0))
        assert step() == {"done": True}
        assert program.wait(timeout=30) == 0
    finally:
        if program.poll() is None:
            program.kill()
        program.communicate()
    assert stub_ha.requests_to("/api/states") == []


def test_closing_stdin_with_a_call_waiting_withdraws_its_card(console, api_token, household, stub_ha):
    """A host that ends (stdin closed) while its call waits for the household: the card goes, nothing is read."""
    console.configure(stub_ha.base_url, stub_ha.token)
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": api_token, "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    command = subprocess.Popen([sys.executable, "-m", "console_ha", "mcp", "--url", console.url], env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert command.stdin is not None and command.stdout is not None
    for message in (
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": LIST, "arguments": {}}},
    ):
        command.stdin.write(json.dumps(message) + "\n")
    command.stdin.flush()
    assert json.loads(command.stdout.readline())["id"] == 0
    run(lambda: pending_cards(console, household))
    command.stdin.close()
    command.stdin = None
    assert command.wait(timeout=30) == 0
    command.communicate()
    run(lambda: pending_cards(console, household, count=0))
    assert stub_ha.requests_to("/api/states") == []


def test_a_host_ending_the_command_with_sigterm_withdraws_the_waiting_card(console, api_token, household, stub_ha):
    """A host that stops the command with SIGTERM (the TypeScript SDK does, 2 s after closing its stdin): the
    waiting call's card goes, as when stdin closes, and the command ends cleanly. Before, SIGTERM ended it at once,
    so a cancel whose notice was still on its way left the household's card open for nobody (seen once in CI)."""
    console.configure(stub_ha.base_url, stub_ha.token)
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": api_token, "CONSOLE_HA_MDNS_INTERFACES": "127.0.0.1"}
    command = subprocess.Popen([sys.executable, "-m", "console_ha", "mcp", "--url", console.url], env=env, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert command.stdin is not None and command.stdout is not None
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "host", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": LIST, "arguments": {}}},
        ):
            command.stdin.write(json.dumps(message) + "\n")
        command.stdin.flush()
        assert json.loads(command.stdout.readline())["id"] == 0
        run(lambda: pending_cards(console, household))
        command.terminate()  # stdin stays open: only the signal ends it
        assert command.wait(timeout=30) == 0
        run(lambda: pending_cards(console, household, count=0))
    finally:
        if command.poll() is None:
            command.kill()
        command.communicate()
    assert stub_ha.requests_to("/api/states") == []

"""`console-ha mcp --url URL`, spawned through the SDK's own stdio client, forwarding to a served Console."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from typing import Any

import jsonschema
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from tests.mcp.conftest import CLIENT_NAME
from tests.mcp.test_mcp_http import ENTITY, HISTORY, LIST, error_of, household_answers, pending_cards, run


def command(url: str, token: str) -> StdioServerParameters:
    env = {**os.environ, "CONSOLE_HA_API_TOKEN": token}
    return StdioServerParameters(command=sys.executable, args=["-m", "console_ha", "mcp", "--url", url], env=env)


def test_the_stdio_command_reads_history_only_after_the_household_approves(console, api_token, household, stub_ha):
    console.configure(stub_ha.base_url, stub_ha.token)
    progress: list[str | None] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message)

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
    assert {tool.name for tool in tools} == {LIST, HISTORY}
    assert error_of(refused)["code"] == "ENTITY_NOT_ALLOWLISTED"
    assert card["client"] == CLIENT_NAME
    assert result.isError is False
    jsonschema.validate(result.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    assert result.structuredContent["period"] == "week"
    assert progress and console.url + "/confirmations" in (progress[0] or "")


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
    import console_ha.web.mcp as web_mcp

    monkeypatch.setattr(web_mcp, "SESSION_IDLE_SECONDS", 1.0)
    console = make_console()

    async def scenario() -> tuple[list[types.Tool], types.CallToolResult, types.CallToolResult]:
        async with stdio_client(command(console.url, api_token)) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            assert len((await session.list_tools()).tools) == 2
            await asyncio.sleep(3)  # the Console's session idles out
            tools = (await asyncio.wait_for(session.list_tools(), 20)).tools
            first = await asyncio.wait_for(session.call_tool(LIST, {}), 20)
            await asyncio.sleep(3)  # and again, now with two requests finding it gone at once
            both = await asyncio.wait_for(asyncio.gather(session.list_tools(), session.call_tool(LIST, {})), 20)
            return tools, first, both[1]

    tools, refused, refused_again = run(scenario)
    assert {tool.name for tool in tools} == {LIST, HISTORY}
    assert error_of(refused)["code"] == "CAPABILITY_DISABLED"
    assert error_of(refused_again)["code"] == "CAPABILITY_DISABLED"

"""Closing the MCP endpoint (as `console-ha serve` and the fixtures do) leaves nothing of its event loop behind."""

from __future__ import annotations

import asyncio

from tests.mcp.conftest import ServedConsole, mcp_session
from tests.mcp.test_mcp_http import run


def test_closing_the_endpoint_closes_its_loop_with_no_task_left_pending(console: ServedConsole, api_token: str) -> None:
    async def scenario() -> None:
        async with mcp_session(console.mcp_url, api_token) as session:
            await session.list_tools()

    run(scenario)
    endpoint = console.app.extensions["console_ha_mcp"]
    loop = endpoint._loop
    assert isinstance(loop, asyncio.AbstractEventLoop)
    # The SDK's streams leave tasks waiting on the loop (sse_starlette's shutdown watcher, for one).
    endpoint.close()
    assert loop.is_closed(), "an unclosed loop keeps its descriptors until the garbage collector finds it"
    # Pending tasks of a closed loop would be destroyed later ("Task was destroyed but it is pending!").
    assert asyncio.all_tasks(loop) == set()

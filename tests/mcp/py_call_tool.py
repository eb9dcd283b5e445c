"""One MCP program built on the official Python SDK, with a 10-second read timeout (as a host might set).

It calls one tool over streamable HTTP, and calls again while the Console answers `waiting_for_household`.
Usage: python py_call_tool.py URL TOOL ARGUMENTS_JSON [MAX_CALLS]; the API token comes from
CONSOLE_HA_API_TOKEN. Prints one JSON line per call result, then `{"done": true}` (as ts_client/call_tool.mjs).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

READ_TIMEOUT = timedelta(seconds=10)


async def main(url: str, tool: str, arguments: dict[str, object], max_calls: int) -> None:
    headers = {"Authorization": f"Bearer {os.environ['CONSOLE_HA_API_TOKEN']}"}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write, _), \
            ClientSession(read, write, read_timeout_seconds=READ_TIMEOUT) as session:
        await session.initialize()
        await session.list_tools()  # so the SDK checks each result against the tool's outputSchema
        for call in range(max_calls):
            started = time.monotonic()
            result = await session.call_tool(tool, arguments)
            structured = result.structuredContent or {}
            waiting = "waiting_for_household" in structured
            print(json.dumps({"call": call, "seconds": time.monotonic() - started, "waiting": waiting,
                              "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}),
                  flush=True)
            if not waiting:
                break
    print(json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4]) if len(sys.argv) > 4 else 5))

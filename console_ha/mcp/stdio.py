"""`console-ha mcp --url URL`: an MCP server on stdio that forwards every request to a Console's `/mcp`.

For MCP hosts that start a command rather than connect to a URL. It holds no capability of its own:
the Console behind it runs the executor and asks the household; this relays tools, calls, progress
and cancellation, with the API token from `CONSOLE_HA_API_TOKEN`. Built from the SDK's own client
(streamable HTTP) and server (stdio) pieces.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from .. import __version__
from ..confirmations import CONFIRMATION_TTL_SECONDS
from ..errors import ConsoleHaError

log = logging.getLogger(__name__)

TOKEN_ENV = "CONSOLE_HA_API_TOKEN"
# A call may wait for the household as long as a card stays open; the HTTP read must outlast that.
READ_TIMEOUT_SECONDS = CONFIRMATION_TTL_SECONDS + 60


class McpForwardError(ConsoleHaError):
    """The forwarder cannot start: no token, or no Console at the URL."""

    code = "MCP_FORWARD_FAILED"


def endpoint_url(url: str) -> str:
    """The Console's `/mcp` for a Console URL (with or without `/mcp` already on it)."""
    base = url.strip().rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise McpForwardError("--url must be the Console's http:// or https:// address.")
    return base if base.endswith("/mcp") else base + "/mcp"


def api_token() -> str:
    """The API token from the environment, never from the command line (where `ps` would show it)."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        raise McpForwardError(f"Set {TOKEN_ENV} to an API token made with `console-ha api-token create`.")
    return token


def build_forwarder(upstream: ClientSession, instructions: str | None) -> Server:
    """A stdio-side server whose tools and calls are the Console's, relayed through `upstream`."""
    server: Server = Server("console-ha", version=__version__, instructions=instructions)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return (await upstream.list_tools()).tools

    @server.call_tool(validate_input=False)  # the Console validates (stage 2), with the contract's codes
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = server.request_context
        progress_token = context.meta.progressToken if context.meta is not None else None

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            if progress_token is not None:
                await context.session.send_progress_notification(
                    progress_token, progress, total, message, related_request_id=str(context.request_id))

        # The SDK numbers requests in order and sends this call's before its first pause, so this is the
        # id the Console will know it by: needed to pass a cancellation on.
        upstream_id = upstream._request_id
        try:
            return await upstream.call_tool(name, arguments,
                                            progress_callback=relay if progress_token is not None else None)
        except anyio.get_cancelled_exc_class():
            # The host cancelled: tell the Console, so the household's card goes away too.
            with anyio.CancelScope(shield=True):
                await upstream.send_notification(types.ClientNotification(types.CancelledNotification(
                    params=types.CancelledNotificationParams(requestId=upstream_id, reason="cancelled by the host"))))
            raise

    return server


async def forward(url: str, token: str) -> None:
    """Serve MCP on stdio until the host closes it, relaying to the Console at `url`."""
    headers = {"Authorization": f"Bearer {token}"}
    timeout = httpx.Timeout(30.0, read=READ_TIMEOUT_SECONDS)
    async with httpx.AsyncClient(headers=headers, timeout=timeout) as http, \
            streamable_http_client(endpoint_url(url), http_client=http) as (read, write, _), \
            ClientSession(read, write) as upstream:
        initialized = await upstream.initialize()
        server = build_forwarder(upstream, initialized.instructions)
        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())


def run(url: str) -> int:
    """The `console-ha mcp` command: forward until stdin closes; 2 when the Console cannot be used."""
    token = api_token()
    endpoint_url(url)
    try:
        anyio.run(forward, url, token)
    except KeyboardInterrupt:
        return 0
    except Exception as err:  # an ExceptionGroup from the SDK's task groups, an HTTP error, a refused connection
        raise McpForwardError(f"Could not use the Console at {url}: {_reason(err)}") from None
    return 0


def _reason(err: BaseException) -> str:
    # The innermost cause says what happened (401, connection refused); never the token, which is in no URL.
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    if isinstance(err, httpx.HTTPStatusError):
        if err.response.status_code == 401:
            return f"the API token in {TOKEN_ENV} was not accepted."
        return f"it answered {err.response.status_code}."
    if isinstance(err, httpx.TransportError):
        return "it could not be reached."
    return type(err).__name__

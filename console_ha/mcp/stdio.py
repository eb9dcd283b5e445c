"""`console-ha mcp --url URL`: an MCP server on stdio that forwards every request to a Console's `/mcp`.

For MCP hosts that start a command rather than connect to a URL. It holds no capability of its own:
the Console behind it runs the executor and asks the household; this relays tools, calls, progress
and cancellation, with the API token from `CONSOLE_HA_API_TOKEN`. Built from the SDK's own client
(streamable HTTP) and server (stdio) pieces.
"""

from __future__ import annotations

import logging
import os
import ssl
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import httpx
import mcp.types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import McpError

from console_ha import __version__
from console_ha.capabilities.confirmations import CONFIRMATION_TTL_SECONDS
from console_ha.errors import McpForwardError as McpForwardError

log = logging.getLogger(__name__)

TOKEN_ENV = "CONSOLE_HA_API_TOKEN"
# A call may wait for the household as long as a card stays open; the HTTP read must outlast that.
READ_TIMEOUT_SECONDS = CONFIRMATION_TTL_SECONDS + 60
# The code the SDK's client gives a request answered 404 for its session: the Console ended the session
# (idle for 30 minutes, or restarted), so the request never reached it.
SESSION_TERMINATED = 32600

T = TypeVar("T")


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


class _Session:
    """One MCP session with the Console, and how many requests are using it."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session
        self.lost = anyio.Event()
        self.users = 0
        self.unused = anyio.Event()


class Upstream:
    """The MCP session with the Console, opened again whenever the Console has ended the last one.

    A host keeps this command running for days; the Console ends a session idle for 30 minutes, and a
    restart ends them all. Each session lives in a task of its own (the SDK's client must be closed in
    the task that opened it); a request that finds its session gone is sent once more in a new one.
    """

    def __init__(self, url: str, http: httpx.AsyncClient) -> None:
        self._url = url
        self._http = http
        self._current: _Session | None = None
        self._ready = anyio.Event()
        self.instructions: str | None = None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep a session open, opening a new one each time the current one is lost."""
        started = False
        while True:
            async with streamable_http_client(self._url, http_client=self._http) as (read, write, _), \
                    ClientSession(read, write) as session:
                self.instructions = (await session.initialize()).instructions
                current = self._current = _Session(session)
                self._ready.set()
                if not started:
                    started = True
                    task_status.started()
                await current.lost.wait()
                # Closing the SDK's client cancels its requests without an answer: let each request still
                # in the lost session get its own 404 first, so that it, too, is sent again.
                while current.users:
                    current.unused = anyio.Event()
                    await current.unused.wait()

    async def send(self, request: Callable[[ClientSession], Awaitable[T]]) -> T:
        """`request` in the current session; once more in a new one when the Console had ended it."""
        for attempt in range(2):
            await self._ready.wait()
            current = self._current
            assert current is not None
            current.users += 1
            try:
                return await request(current.session)
            except McpError as err:
                if err.error.code != SESSION_TERMINATED or attempt:
                    raise
                if not current.lost.is_set():
                    # The first request to find it gone asks for a new session; the others wait for it.
                    log.info("the Console ended the MCP session; opening a new one")
                    self._ready = anyio.Event()
                    current.lost.set()
            finally:
                current.users -= 1
                if not current.users:
                    current.unused.set()
        raise AssertionError("unreachable: the second attempt returns or raises")


def build_forwarder(upstream: Upstream, instructions: str | None) -> Server:
    """A stdio-side server whose tools and calls are the Console's, relayed through `upstream`."""
    server: Server = Server("console-ha", version=__version__, instructions=instructions)

    # The SDK's decorator factories carry no annotations; the handlers below are fully typed.
    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        return (await upstream.send(lambda session: session.list_tools())).tools

    # The Console validates (stage 2), with the contract's codes.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        context = server.request_context
        progress_token = context.meta.progressToken if context.meta is not None else None

        async def relay(progress: float, total: float | None, message: str | None) -> None:
            if progress_token is not None:
                await context.session.send_progress_notification(
                    progress_token, progress, total, message, related_request_id=str(context.request_id))

        async def call(session: ClientSession) -> types.CallToolResult:
            # The SDK numbers requests in order and sends this call's before its first pause, so this is
            # the id the Console will know it by: needed to pass a cancellation on.
            upstream_id = session._request_id
            try:
                return await session.call_tool(name, arguments,
                                               progress_callback=relay if progress_token is not None else None)
            except anyio.get_cancelled_exc_class():
                # The host cancelled: tell the Console, so the household's card goes away too.
                with anyio.CancelScope(shield=True):
                    await session.send_notification(types.ClientNotification(types.CancelledNotification(
                        params=types.CancelledNotificationParams(requestId=upstream_id,
                                                                 reason="cancelled by the host"))))
                raise

        return await upstream.send(call)

    return server


def console_client(token: str) -> httpx.AsyncClient:
    """The HTTP client that carries the API token: to the Console's URL only, never through a proxy.

    trust_env=False: httpx would otherwise send every request (Authorization header and all) to any
    HTTP(S)_PROXY or ALL_PROXY in the host's environment, and add ~/.netrc credentials. A certificate
    authority named in SSL_CERT_FILE or SSL_CERT_DIR is still trusted, as it would be with the default.
    """
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False, verify=_authorities(),
                             timeout=httpx.Timeout(30.0, read=READ_TIMEOUT_SECONDS))


def _authorities() -> ssl.SSLContext | bool:
    # What httpx reads from the environment when trusting it: SSL_CERT_FILE first, then SSL_CERT_DIR.
    cafile, capath = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    if cafile:
        return ssl.create_default_context(cafile=cafile)
    if capath:
        return ssl.create_default_context(capath=capath)
    return True  # httpx's own default authorities


async def forward(url: str, token: str) -> None:
    """Serve MCP on stdio until the host closes it, relaying to the Console at `url`."""
    async with console_client(token) as http, anyio.create_task_group() as group:
        upstream = Upstream(endpoint_url(url), http)
        await group.start(upstream.run)
        server = build_forwarder(upstream, upstream.instructions)
        async with stdio_server() as (stdin, stdout):
            await server.run(stdin, stdout, server.create_initialization_options())
        group.cancel_scope.cancel()


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

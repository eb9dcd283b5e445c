"""`console-ha mcp --url URL`: an MCP server on stdio that forwards every request to a Console's `/mcp`.

For MCP hosts that start a command rather than connect to a URL. It holds no capability of its own:
the Console behind it runs the executor and asks the household; this relays tools, calls, progress
and cancellation, with the API token from `CONSOLE_HA_API_TOKEN`. Built from the SDK's own client
(streamable HTTP) and server pieces; stdin and stdout are its own (`host_stdio`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import signal
import ssl
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from mcp.shared.session import RequestResponder
from pydantic import ValidationError

from console_ha import __version__
from console_ha.capabilities.confirmations import CONFIRMATION_TTL_SECONDS
from console_ha.errors import McpForwardError as McpForwardError
from console_ha.errors import PayloadTooLarge
from console_ha.mcp.server import MAX_REQUEST_BYTES, error_of

log = logging.getLogger(__name__)

TOKEN_ENV = "CONSOLE_HA_API_TOKEN"
# A call may wait for the household as long as a card stays open; the HTTP read must outlast that.
READ_TIMEOUT_SECONDS = CONFIRMATION_TTL_SECONDS + 60
# The code the SDK's client gives a request answered 404 for its session: the Console ended the session
# (idle for 30 minutes, or restarted), so the request never reached it.
SESSION_TERMINATED = 32600
# How long the URL may take to answer MCP's first request. A Console answers `initialize` in well under a
# second; a URL that accepts it and answers nothing (202, an empty stream, a server that never replies)
# must not keep the command, and the host that started it, waiting for the read timeout's six minutes.
INITIALIZE_TIMEOUT_SECONDS = 10.0
# How much of a content type the message quotes (it comes from whatever answers at the URL).
MAX_QUOTED_CHARS = 80
STDIN_CHUNK_BYTES = 65536
# How long a cancelled call's notice may take to reach the Console (the command may be ending meanwhile).
CANCEL_NOTICE_SECONDS = 5.0
# What a call's message holds besides its name and arguments (jsonrpc, id, method, a progress token), at most.
ENVELOPE_BYTES = 512

T = TypeVar("T")


class NotAnMcpServer(Exception):
    """The URL answered, but not as an MCP server does: the message says what came back."""


class _WithoutSdkTracebacks(logging.Filter):
    """Keeps the MCP SDK's own log lines to their one-line message, without the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        # The SDK logs a garbled answer with its traceback (pydantic's 20-40 lines for `200 []`) before it hands
        # the error on; the command names what it found in one sentence of its own (`_reason`), which the
        # household reads. The SDK's one line stays, for whoever reports the problem.
        if record.name.startswith("mcp."):
            record.exc_info, record.exc_text, record.stack_info = None, None, None
        return True


def log_to_stderr() -> None:
    """Send log lines to stderr (stdout is the MCP channel), warnings and worse, the SDK's without tracebacks."""
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.addFilter(_WithoutSdkTracebacks())


def _quoted(text: str) -> str:
    # Printable ASCII only: this is shown in a terminal, and the answering server chose it.
    return "".join(char for char in text if " " <= char <= "~")[:MAX_QUOTED_CHARS]


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
        # What the URL last answered (status and content type), and set once it answered what MCP cannot
        # read: the SDK's client hands such an answer to its session as an exception, and the session only
        # passes it to a message handler, so the request it answered would wait for ever.
        self._last_answer = "no answer"
        self._garbled = anyio.Event()
        self._waiting = anyio.CancelScope()  # what the session waits for now: cancelled when garbled
        self._found = ""
        self._session_id: Callable[[], str | None] = lambda: None
        self._protocol = types.LATEST_PROTOCOL_VERSION
        http.event_hooks["response"].append(self._note_answer)

    async def _note_answer(self, response: httpx.Response) -> None:
        content_type = _quoted(response.headers.get("content-type", "")) or "no content type"
        self._last_answer = f"{response.status_code} ({content_type})"

    async def _on_message(self, message: RequestResponder[types.ServerRequest, types.ClientResult]
                          | types.ServerNotification | Exception) -> None:
        # A ValueError is what the SDK's client makes of an answer it cannot read: not JSON-RPC (pydantic's
        # ValidationError is one) or not JSON at all ("Unexpected content type"). Other exceptions are not the
        # URL's fault: a late answer to a request the host cancelled ("unknown request ID"), which MCP says to
        # ignore, or a network error while a body was read.
        if isinstance(message, ValueError) and not self._garbled.is_set():
            self._found = self._last_answer
            self._garbled.set()
            self._waiting.cancel()

    def _not_mcp(self) -> NotAnMcpServer:
        return NotAnMcpServer(f"it answered {self._found}, which is not an MCP server's answer. "
                              f"Is {self._url} the Console's address?")

    async def _unless_garbled(self, step: Callable[[], Awaitable[T]]) -> T:
        """`step`'s result, unless the URL first answers something MCP cannot read: then NotAnMcpServer."""
        # A cancel scope rather than a task group, so what `step` raises comes out as itself, not in a group.
        with anyio.CancelScope() as self._waiting:
            if not self._garbled.is_set():
                return await step()
        raise self._not_mcp()

    async def _initialize(self, session: ClientSession) -> types.InitializeResult:
        """MCP's first request, answered as an MCP server answers it within INITIALIZE_TIMEOUT_SECONDS."""
        try:
            with anyio.fail_after(INITIALIZE_TIMEOUT_SECONDS):
                return await self._unless_garbled(session.initialize)
        except ValidationError:
            # JSON-RPC, but its result is no MCP server's (an `initialize` answered with `{}`).
            self._found = self._last_answer
            raise self._not_mcp() from None

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Keep a session open, opening a new one each time the current one is lost."""
        started = False
        while True:
            async with streamable_http_client(self._url, http_client=self._http) as (read, write, session_id), \
                    ClientSession(read, write, message_handler=self._on_message) as session:
                initialized = await self._initialize(session)
                self.instructions, self._protocol = initialized.instructions, str(initialized.protocolVersion)
                self._session_id = session_id
                current = self._current = _Session(session)
                self._ready.set()
                if not started:
                    started = True
                    task_status.started()
                # An answer MCP cannot read later on ends the command too: its request would never be answered.
                await self._unless_garbled(current.lost.wait)
                # Closing the SDK's client cancels its requests without an answer: let each request still
                # in the lost session get its own 404 first, so that it, too, is sent again.
                while current.users:
                    current.unused = anyio.Event()
                    await current.unused.wait()

    async def cancel(self, request_id: int) -> None:
        """Tell the Console its request `request_id` was cancelled, and wait until the Console has the notice.

        Posted here rather than queued with the SDK's client (`send_notification`), whose writer only posts it
        later: a host that cancels and then closes stdin ends this command first, and the household's card
        would stay open for a call nobody waits for.
        """
        notice = types.JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled",
                                           params={"requestId": request_id, "reason": "cancelled by the host"})
        headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": self._protocol}
        if (session_id := self._session_id()) is not None:
            headers["mcp-session-id"] = session_id
        with anyio.move_on_after(CANCEL_NOTICE_SECONDS):
            try:
                await self._http.post(self._url, json=notice.model_dump(by_alias=True, exclude_none=True),
                                      headers=headers)
            except httpx.HTTPError as err:
                log.info("could not tell the Console of a cancelled call: %s", type(err).__name__)

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
        if _too_large(name, arguments):
            # The Console answers such a body 413, which the SDK's client raises in its own task group: the
            # whole session, and this command, would end over one call. Answered here, with the Console's code.
            return error_of(PayloadTooLarge(
                f"The call is larger than the Console takes ({MAX_REQUEST_BYTES // 1024} KiB), so nothing was sent."))
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
                # The host cancelled (or closed stdin): tell the Console, so the household's card goes away too.
                with anyio.CancelScope(shield=True):
                    await upstream.cancel(upstream_id)
                raise

        return await upstream.send(call)

    return server


def _too_large(name: str, arguments: dict[str, Any]) -> bool:
    """Whether the call's message, as the SDK's client will post it (compact UTF-8 JSON), is over the bound."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, separators=(",", ":"),
                      default=str)
    return len(body.encode("utf-8", "surrogatepass")) + ENVELOPE_BYTES > MAX_REQUEST_BYTES


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


HostMessages = MemoryObjectReceiveStream[SessionMessage | Exception]


def _message(line: str) -> SessionMessage | Exception:
    # As the SDK's stdio server reads a line: a line that is no JSON-RPC message reaches the server as its error.
    try:
        return SessionMessage(types.JSONRPCMessage.model_validate_json(line))
    except Exception as err:
        return err


def _stdin_lines() -> Iterator[str]:
    """The host's lines from file descriptor 0, read with os.read: no buffered reader's lock is held while
    it waits, which a daemon thread must not hold at the interpreter's exit (Python aborts if it does)."""
    pending = b""
    while chunk := os.read(0, STDIN_CHUNK_BYTES):
        *lines, pending = (pending + chunk).split(b"\n")
        yield from (line.decode("utf-8", errors="replace") for line in lines)
    if pending:
        yield pending.decode("utf-8", errors="replace")


def _read_stdin(token: anyio.lowlevel.EventLoopToken,
                to_server: MemoryObjectSendStream[SessionMessage | Exception]) -> None:
    """The host's lines, one MCP message each, until stdin ends (then the server's stream ends too)."""
    try:
        for line in _stdin_lines():
            if line.strip():
                anyio.from_thread.run(to_server.send, _message(line), token=token)
        anyio.from_thread.run_sync(to_server.close, token=token)
    except (RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return  # the command is ending, and nothing reads the host any more


@asynccontextmanager
async def host_stdio() -> AsyncIterator[tuple[HostMessages, MemoryObjectSendStream[SessionMessage]]]:
    """The host's side: its messages from stdin, and a stream whose messages go to stdout, a line each.

    Not the SDK's `stdio_server`, which reads stdin in one of anyio's worker threads: the interpreter waits
    for that thread at exit, so a command that has to stop while the host keeps stdin open (its URL stopped
    answering as MCP) would not end until the host closed it. A daemon thread reads stdin here instead.
    """
    to_server, from_host = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_host, from_server = anyio.create_memory_object_stream[SessionMessage](0)
    threading.Thread(target=_read_stdin, args=(anyio.lowlevel.current_token(), to_server), name="mcp-host-stdin",
                     daemon=True).start()
    stdout = anyio.wrap_file(io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))

    async def write_stdout() -> None:
        async with from_server:
            async for message in from_server:
                await stdout.write(message.message.model_dump_json(by_alias=True, exclude_none=True) + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as group:
        group.start_soon(write_stdout)
        yield from_host, to_host
        group.cancel_scope.cancel()


async def forward(url: str, token: str) -> None:
    """Serve MCP on stdio until the host closes it or stops the command, relaying to the Console at `url`."""
    async with console_client(token) as http, anyio.create_task_group() as group:
        upstream = Upstream(endpoint_url(url), http)
        await group.start(upstream.run)
        server = build_forwarder(upstream, upstream.instructions)
        with anyio.CancelScope() as serving:
            group.start_soon(_stop_on_sigterm, serving)
            async with host_stdio() as (stdin, stdout):
                await server.run(stdin, stdout, server.create_initialization_options())
        group.cancel_scope.cancel()


async def _stop_on_sigterm(serving: anyio.CancelScope) -> None:
    """SIGTERM ends the command as stdin's end does: each waiting call is cancelled and tells the Console.

    Hosts stop a command so (the TypeScript SDK two seconds after closing stdin): Python's own SIGTERM ended
    the process at once, and a household's card stayed open for a call whose notice had not gone yet.
    """
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            serving.cancel()
            return


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
    if isinstance(err, NotAnMcpServer):
        return str(err)
    if isinstance(err, TimeoutError):
        return f"it did not answer MCP's first request within {INITIALIZE_TIMEOUT_SECONDS:g} seconds."
    if isinstance(err, McpError):
        return f"it refused MCP's first request: {_quoted(err.error.message)}"
    if isinstance(err, httpx.HTTPStatusError):
        if err.response.status_code == 401:
            return f"the API token in {TOKEN_ENV} was not accepted."
        return f"it answered {err.response.status_code}."
    if isinstance(err, httpx.TransportError):
        return "it could not be reached."
    return type(err).__name__

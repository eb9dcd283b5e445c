"""`/mcp`: the MCP server over streamable HTTP, served by the Console's own WSGI server and port.

The SDK's streamable HTTP transport is ASGI and the Console is WSGI (waitress). The route below is an
ordinary Flask view, so everything the app checks before a view (the Host allowlist, the API token)
holds for `/mcp` too; the view then hands the request to the SDK's session manager through a2wsgi,
whose event loop runs in one thread for the whole app. Responses stream: a call's progress
notifications reach the client while it waits. See docs/mcp.md for why this shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import math
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from a2wsgi import ASGIMiddleware
from flask import Blueprint, Flask, Response, current_app, request, url_for
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from werkzeug.exceptions import RequestEntityTooLarge
from werkzeug.http import is_hop_by_hop_header
from werkzeug.wrappers import Response as WerkzeugResponse

from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.errors import InvalidRequest, NotFound, RateLimited, Unauthenticated, error_body
from console_ha.mcp.server import CALLER_SCOPE_KEY, MAX_REQUEST_BYTES, PROGRESS_INTERVAL_SECONDS, build_server
from console_ha.store.console_secrets import DEFAULT_PATIENCE_SECONDS
from console_ha.web import services
from console_ha.web.auth import current_principal

log = logging.getLogger(__name__)

# ASGI as the MCP SDK's session manager types it (starlette's shapes): a scope and a message are mappings.
_Message = MutableMapping[str, Any]
_Send = Callable[[_Message], Awaitable[None]]

bp = Blueprint("mcp", __name__)

EXTENSION = "console_ha_mcp"
# The request environ key that carries the caller from the view to the ASGI side.
CALLER_ENVIRON_KEY = "console_ha.mcp_caller"
# The request environ key of the request's _Exchange, where the bridge notes the task serving it.
TASK_ENVIRON_KEY = "console_ha.mcp_task"
# An MCP message is a few levels deep (a tool's arguments sit at the fourth); this bounds the work and
# the recursion of everything that handles one after the Console (pydantic, the SDK, the executor).
MAX_NESTING = 32
MAX_SESSIONS = 64
# One API token's share of them: a host that reconnects without closing its sessions (they last until
# idle for SESSION_IDLE_SECONDS), or a hostile one, must not lock every other program out.
MAX_SESSIONS_PER_TOKEN = 16
SESSION_IDLE_SECONDS = 30 * 60
AFTER_RESPONSE_SECONDS = 5.0


@dataclass
class _Exchange:
    """One request to /mcp: the event loop's task that serves it, once it has started."""

    task: asyncio.Task[Any] | None = None
    # Set once the WSGI server closed the response (the client hung up, or it ended): its call is detached.
    closed: bool = False


async def _cancel_the_rest() -> None:
    """Cancel every other task on the running loop and wait for them, as asyncio.run does before it closes one
    (the SDK's streams leave watchers such as sse_starlette's shutdown watcher pending)."""
    rest = asyncio.all_tasks() - {asyncio.current_task()}
    for task in rest:
        task.cancel()
    if rest:
        await asyncio.wait(rest, timeout=5)
    await asyncio.get_running_loop().shutdown_asyncgens()


class McpEndpoint:
    """The household queue, the MCP server over it, and the bridge that serves it from WSGI."""

    def __init__(self, queue: HouseholdQueue, instance_ids: Callable[[], Sequence[str]], *,
                 progress_interval: float = PROGRESS_INTERVAL_SECONDS) -> None:
        self.queue = queue
        self._manager = StreamableHTTPSessionManager(
            app=build_server(queue, instance_ids, progress_interval=progress_interval),
            # Host checks are the Flask app's (they ran before the view); the SDK's own would need the
            # same list a second time.
            security_settings=None,
            session_idle_timeout=SESSION_IDLE_SECONDS,
            max_sessions=MAX_SESSIONS,
            max_request_body_size=MAX_REQUEST_BYTES,
        )
        self._lock = threading.Lock()
        self._wsgi: ASGIMiddleware | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        # Which API token (token_id, not its name, which two tokens may share) opened each MCP session:
        # another token cannot use (or cancel in) it.
        self._owners: dict[str, str] = {}
        # The (session, JSON-RPC id) of every request still open, with how many hold it: its response, and
        # its tool call while that runs. The SDK keys a request's response stream by `str(id)` alone: a
        # second request with the same id (or `"1"` after `1`) would take the first's stream over, leaving
        # the first response (and its thread) open for good; and a call whose client hung up (its response
        # closed) still answers once the household does, into whichever request holds its id by then.
        # Keyed by the token too, so another token's request (which gets 404) never collides with it.
        self._in_flight: dict[tuple[str, str, str], int] = {}
        # The event loop's tasks serving a request now (changed on the loop only).
        self._serving: set[asyncio.Task[Any] | None] = set()

    def claim(self, token_id: str, session_id: str | None, message: object) -> tuple[str, str, str] | None:
        """Note a request's id as in flight in its session; InvalidRequest when it already is."""
        key = _request_key(token_id, session_id, message)
        if key is None:
            return None
        with self._lock:
            if key in self._in_flight:
                raise InvalidRequest("A request with this id is still open in this MCP session; "
                                     "use a new id for each request.")
            self._in_flight[key] = 1
        return key

    @contextlib.contextmanager
    def holding(self, key: tuple[str, str, str] | None) -> Iterator[None]:
        """Keep a request's id in flight while its tool call runs, even past its response's end."""
        with self._lock:
            held = key if key in self._in_flight else None  # its response ended first: nothing to keep
            if held is not None:
                self._in_flight[held] += 1
        try:
            yield
        finally:
            if held is not None:
                self.release(held)

    def release(self, key: tuple[str, str, str]) -> None:
        """One holder of the request's id is done (its response, or its call); the last frees the id."""
        with self._lock:
            holders = self._in_flight.pop(key, 0) - 1
            if holders > 0:
                self._in_flight[key] = holders

    def end(self, exchange: _Exchange, key: tuple[str, str, str] | None) -> None:
        """The response is closed, finished or not: end its task on the event loop, then free its id.

        a2wsgi ends the task itself only when the response ran to its end. When the client hung up, the
        WSGI server closes the response early and the task would wait forever to send the call's answer,
        holding the SDK's stream for the id; the id is freed only once that stream is gone.
        """
        exchange.closed = True
        task, loop = exchange.task, self._loop
        if task is not None and loop is not None and not task.done():
            try:
                asyncio.run_coroutine_threadsafe(_cancelled(task), loop).result(timeout=AFTER_RESPONSE_SECONDS)
            except Exception:  # a task that does not end in time is logged, and the id freed anyway
                log.warning("an MCP request's task did not end after its response closed")
        if key is not None:
            self.release(key)

    def open_requests(self) -> int:
        """How many requests are open now: their response (which holds a worker thread), or their call."""
        with self._lock:
            return len(self._in_flight)

    def serving(self) -> int:
        """How many requests the event loop is serving now; 0 once every response has ended."""
        return len(self._serving)  # read from another thread: len() of a set is atomic

    def wsgi_app(self) -> Callable[..., Any]:
        """The bridged WSGI app; the first call starts the event loop and the session manager."""
        with self._lock:
            if self._wsgi is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="console-ha-mcp", daemon=True)
                thread.start()
                asyncio.run_coroutine_threadsafe(self._start(), loop).result(timeout=30)
                self._loop, self._thread = loop, thread
                # wait_time: once a response is sent, its ASGI task gets this long to finish before it is
                # cancelled, so a worker thread is never held by a task that lingers after its answer.
                # a2wsgi types the same scope and messages as TypedDicts, which are not MutableMappings to mypy.
                self._wsgi = ASGIMiddleware(self._asgi, wait_time=AFTER_RESPONSE_SECONDS,  # type: ignore[arg-type]
                                            loop=loop)
            return self._wsgi

    def close(self) -> None:
        """Stop the session manager (cancelling every open call) and its event loop, for good.

        The SDK's session manager runs once per instance: an app whose endpoint was closed is done.
        """
        with self._lock:
            loop, thread, stop = self._loop, self._thread, self._stop
            self._wsgi = self._loop = self._thread = self._stop = None
        if loop is None or thread is None or stop is None:
            return
        loop.call_soon_threadsafe(stop.set)
        done = asyncio.run_coroutine_threadsafe(self._stopped(), loop)
        try:
            done.result(timeout=10)
        except Exception:
            log.warning("the MCP session manager did not stop in time")
        try:
            asyncio.run_coroutine_threadsafe(_cancel_the_rest(), loop).result(timeout=10)
        except Exception:
            log.warning("the MCP event loop's remaining tasks did not end in time")
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        if thread.is_alive():
            log.warning("the MCP event loop did not stop in time; it is left open")
            return
        # Closed here, not left to the garbage collector: an unclosed loop keeps its self-pipe and epoll
        # descriptors open and its pending tasks are destroyed later, in whichever thread collects them.
        loop.close()

    async def _start(self) -> None:
        started = asyncio.Event()
        self._stop = asyncio.Event()
        stop = self._stop

        async def run() -> None:
            async with self._manager.run():
                started.set()
                await stop.wait()

        self._task = asyncio.get_running_loop().create_task(run())
        await started.wait()

    async def _stopped(self) -> None:
        await asyncio.wait({self._task}, timeout=10)

    async def _asgi(self, scope: _Message, receive: Callable[[], Awaitable[_Message]], send: _Send) -> None:
        task = asyncio.current_task()
        exchange = scope.get("wsgi_environ", {}).get(TASK_ENVIRON_KEY)
        if isinstance(exchange, _Exchange):
            exchange.task = task
        self._serving.add(task)
        try:
            await self._serve(scope, receive, send)
        finally:
            self._serving.discard(task)

    async def _serve(self, scope: _Message, receive: Callable[[], Awaitable[_Message]], send: _Send) -> None:
        caller = scope.get("wsgi_environ", {}).get(CALLER_ENVIRON_KEY)
        if not isinstance(caller, Asker):  # only the view below calls this, always with a caller
            await _send_json(send, 401, error_body(Unauthenticated("Send an API token.")))
            return
        scope[CALLER_SCOPE_KEY] = caller
        session_id = _header(scope, b"mcp-session-id")
        if session_id is not None and self._owners.get(session_id) != caller.token_id:
            # Answered as the SDK answers an unknown session: to this token, it does not exist.
            await _send_json(send, 404, error_body(NotFound("There is no such MCP session.")))
            return
        if session_id is None and len(self._open_sessions_of(caller.token_id)) >= MAX_SESSIONS_PER_TOKEN:
            await _send_json(send, 429, error_body(RateLimited(
                f"This API token already has {MAX_SESSIONS_PER_TOKEN} MCP sessions open; close "
                "one (HTTP DELETE) or wait until one has been idle for 30 minutes.")))
            return

        async def send_and_note_owner(message: _Message) -> None:
            if message["type"] == "http.response.start":
                # sse-starlette sends `Connection: keep-alive`; WSGI (PEP 3333) forbids hop-by-hop headers
                # and the WSGI server manages the connection itself.
                message = {**message, "headers": [(k, v) for k, v in message.get("headers", [])
                                                  if not is_hop_by_hop_header(k.decode("latin-1"))]}
            if message["type"] == "http.response.start" and session_id is None:
                opened = _header(message, b"mcp-session-id")
                if opened is not None:
                    # Forget sessions that have ended (so the map stays within MAX_SESSIONS), never a live
                    # one by age: that would end it for its owner, whom it would then answer 404.
                    live = self._manager._server_instances
                    for ended in [sid for sid in self._owners if sid not in live]:
                        del self._owners[ended]
                    self._owners[opened] = caller.token_id
            await send(message)

        await self._manager.handle_request(scope, receive, send_and_note_owner)

    def _open_sessions_of(self, token_id: str) -> list[str]:
        # The SDK offers no public view of its open sessions; `_server_instances` is its registry (the
        # `mcp` version is pinned exactly, and the test of this limit fails if that changes). Runs on
        # the event loop, as does every change to both maps.
        live = self._manager._server_instances
        return [sid for sid, owner in self._owners.items() if owner == token_id and sid in live]


def _never() -> bool:
    return False


def _request_key(token_id: str, session_id: str | None, message: object) -> tuple[str, str, str] | None:
    # Only a request (a message with a method and an id) inside a session has a response to wait for.
    request_id = _request_id(message)
    return None if request_id is None or session_id is None else (token_id, session_id, request_id)


def message_of(body: bytes) -> object:
    """The POSTed JSON-RPC message, parsed; InvalidRequest (or 413) for a body the SDK could not take.

    The SDK answers some malformed bodies with a 500 (bytes that are not UTF-8, JSON nested past the
    interpreter's stack, an integer too long to convert), and takes others it cannot answer (a lone
    surrogate, NaN): the Console answers each of them itself, with the contract's 4xx, before the SDK.
    """
    if len(body) > MAX_REQUEST_BYTES:
        raise RequestEntityTooLarge()
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_refuse_constant, parse_float=_finite)
    except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InvalidRequest("The body must be one JSON-RPC message, as UTF-8 JSON.") from None
    _check_values(message)
    return message


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999: the SDK would echo it back as `Infinity`, which is not JSON
        raise ValueError("a number too large")
    return value


def _check_values(message: object) -> None:
    """InvalidRequest for nesting deeper than MAX_NESTING or a string that is not Unicode text."""
    # A walk with its own stack: the message came from outside, and recursion is what it would exhaust.
    stack = [(message, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            _check_text(value)
        elif isinstance(value, dict | list):
            if depth > MAX_NESTING:
                raise InvalidRequest(f"The message is nested more than {MAX_NESTING} deep.")
            items = [*value, *value.values()] if isinstance(value, dict) else value
            stack.extend((item, depth + 1) for item in items)


def _check_text(value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (`"\ud800"`): the SDK fails to send any answer with it
        raise InvalidRequest("The message holds a string that is not Unicode text.") from None


def _request_id(message: object) -> str | None:
    """A request's id as the SDK keys its response stream (`str(id)`); None for anything but a request."""
    if not isinstance(message, dict) or "method" not in message or "id" not in message:
        return None
    request_id = message["id"]
    # The SDK takes a message whose id is not an int or a str (1.0, true, null) for a notification: it
    # answers 202 and the request is never answered. bool is an int to Python, not to JSON-RPC.
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        raise InvalidRequest("A request's id must be a string or an integer.")
    # `1` and `"1"` are one id to the SDK: both must count as in flight, or the second takes the first's
    # response stream over.
    return str(request_id)


async def _cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    await asyncio.wait({task})


def _header(holder: Mapping[str, Any], name: bytes) -> str | None:
    for key, value in holder.get("headers", []):
        if key.lower() == name:
            decoded: str = value.decode("latin-1")
            return decoded
    return None


async def _send_json(send: _Send, status: int, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]})
    await send({"type": "http.response.body", "body": raw})


def init_app(app: Flask, queue: HouseholdQueue, instance_ids: Callable[[], Sequence[str]]) -> None:
    """Serve the Console's household queue at /mcp, its tools for the Home Assistants `instance_ids` names (asked
    at each listing); the event loop starts at the first MCP request."""
    app.extensions[EXTENSION] = McpEndpoint(
        queue, instance_ids,
        progress_interval=app.config.get("CONSOLE_HA_MCP_PROGRESS_INTERVAL", PROGRESS_INTERVAL_SECONDS))


def mcp_endpoint() -> McpEndpoint:
    """The current app's MCP endpoint."""
    endpoint: McpEndpoint = current_app.extensions[EXTENSION]
    return endpoint


@bp.route("/mcp", methods=["GET", "POST", "DELETE"])
def endpoint() -> WerkzeugResponse:
    """Streamable HTTP for MCP clients with an API token; a browser session is not accepted here."""
    principal = current_principal()
    # The access table makes /mcp an API token's alone (web/access.py); the one guard refused everyone else.
    assert principal is not None and principal.method == "bearer"
    if request.method in ("GET", "HEAD"):  # Flask adds HEAD to every GET route
        # No server-initiated stream: it would hold one of the server's worker threads for as long as
        # the client stays connected, and the Console has nothing to announce outside a call.
        return Response(status=405, headers={"Allow": "POST, DELETE"})
    served = mcp_endpoint()
    # Read here (Flask's MAX_CONTENT_LENGTH bounds it) to check it and see the request's id, then handed on.
    body = request.get_data(cache=True)
    token_id = principal.token_id or ""
    key = None
    if request.method == "POST":
        key = served.claim(token_id, request.headers.get("mcp-session-id"), message_of(body))
    environ = request.environ
    environ["wsgi.input"] = io.BytesIO(body)
    environ["CONTENT_LENGTH"] = str(len(body))
    secrets = services().secrets
    # Werkzeug hands the WSGI app a copy of the environ: the task is noted in an object both share.
    exchange = environ[TASK_ENVIRON_KEY] = _Exchange()
    # waitress says when the client hung up (it keeps reading the connection: cli.WAITRESS_OPTIONS);
    # another WSGI server may not, and then only a closed response says so.
    disconnected = environ.get("waitress.client_disconnected")
    hung_up: Callable[[], bool] = disconnected if callable(disconnected) else _never

    def present() -> bool:
        return not exchange.closed and not hung_up()

    environ[CALLER_ENVIRON_KEY] = Asker(principal.name, token_id, lambda: secrets.has_api_token(token_id), present,
                                        answer_url=url_for("confirmations.page", _external=True),
                                        patience=principal.patience or DEFAULT_PATIENCE_SECONDS,
                                        running=lambda: served.holding(key))
    try:
        response = Response.from_app(served.wsgi_app(), environ)
    except BaseException:
        served.end(exchange, key)
        raise
    response.call_on_close(lambda: served.end(exchange, key))
    return response

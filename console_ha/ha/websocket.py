"""One WebSocket conversation with Home Assistant: auth, allowlisted read-only commands, close.

Used for the picker's areas (three registry lists), for get_history (one `history/history_during_period`
request/response), for get_statistics (the configuration and the statistics metadata together, then
`recorder/statistics_during_period`), for get_todo (`todo/item/list`) and for get_forecast, the one
subscription: `weather/subscribe_forecast`'s first event is taken and the subscription ended at once
(`first_event`). The connection lives for one call only (docs/architecture.md).
"""

from __future__ import annotations

import socket
import ssl
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import orjson
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    RejectConnection,
    RejectData,
    Request,
    TextMessage,
)
from wsproto.utilities import ProtocolError

from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HATimeout, HATLSError, HAUnauthorized, HAUnreachable
from console_ha.secret import Secret

HISTORY_COMMAND = "history/history_during_period"
# get_statistics (issue 19): both only read the recorder's database (websocket_api.py in Home Assistant's
# recorder component: statistics_during_period selects rows, get_statistics_metadata lists metadata; neither
# is require_admin, and neither writes). The recorder's writing commands (import_statistics,
# clear_statistics, adjust_sum_statistics, change_statistics_unit, update_statistics_metadata) stay out.
STATISTICS_COMMAND = "recorder/statistics_during_period"
STATISTICS_METADATA_COMMAND = "recorder/get_statistics_metadata"
# What /api/config answers (websocket_api/commands.py, handle_get_config: hass.config.as_dict(), nothing
# written): get_statistics asks it for the time zone beside the metadata, on the connection it opens anyway.
CONFIG_COMMAND = "get_config"
# get_logbook's one request. Checked in Home Assistant 2025.4.4's components/logbook/websocket_api.py
# (ws_get_events): it parses the times, filters the entity ids, and runs EventProcessor.get_events in a
# read-only recorder session (session_scope(read_only=True)); it answers once and subscribes to nothing.
LOGBOOK_COMMAND = "logbook/get_events"
# get_todo (issue 28). Checked in Home Assistant 2025.4.4's components/todo/__init__.py
# (websocket_handle_todo_item_list): it finds the entity and answers its `todo_items` as a list, once; nothing
# is written or subscribed. Its neighbours todo/item/move and todo/item/subscribe stay out (move writes).
TODO_COMMAND = "todo/item/list"
# get_forecast (issue 28). Home Assistant 2025.4.4 gives a forecast through the `weather.get_forecasts`
# service call (which a read-only client never makes) or this subscription. Checked in
# components/weather/websocket_api.py (ws_subscribe_forecast) and weather/__init__.py: it adds a listener to
# the entity's in-memory list (async_subscribe_forecast), answers `success`, and pushes the forecast the entity
# already has (async_update_listeners calls its async_forecast_<type>); nothing is stored. The Console takes
# the first event and unsubscribes at once.
FORECAST_COMMAND = "weather/subscribe_forecast"
# Ends one of this connection's own subscriptions (websocket_api/commands.py, handle_unsubscribe_events: it
# pops the connection's listener, nothing else); closing the connection would end it too.
UNSUBSCRIBE_COMMAND = "unsubscribe_events"
# Home Assistant's commands known to change nothing, and the only ones ever sent after the auth message:
# the WebSocket has no verb, so this list is what GET is to REST. A connection sends those of them its
# maker declared (`ha.reads.Reads`); a declaration naming another is refused when it is made. Checked
# before every send (and by a syntax-tree test that nothing else in the package writes to a socket).
# A new read adds its command here once it is checked, in Home Assistant's source, to be a read.
ALLOWED_COMMANDS = frozenset({
    "config/area_registry/list",
    "config/entity_registry/list",
    "config/device_registry/list",
    HISTORY_COMMAND,
    # issue 19, get_statistics
    STATISTICS_COMMAND,
    STATISTICS_METADATA_COMMAND,
    CONFIG_COMMAND,
    LOGBOOK_COMMAND,
    # issue 28, get_todo and get_forecast
    TODO_COMMAND,
    FORECAST_COMMAND,
    UNSUBSCRIBE_COMMAND,
})
READ_CHUNK_BYTES = 64 * 1024
CLOSE_WAIT = 0.2
# auth_required, auth_ok and auth_invalid are a few dozen bytes; no byte cap of a read applies to them.
AUTH_MESSAGE_BYTES = 64 * 1024
# Command errors that mean "this Home Assistant cannot answer that over the WebSocket": ask REST instead.
UNSUPPORTED_ERRORS = frozenset({"unknown_command", "invalid_format"})


class WebSocketUnsupported(HABadResponse):
    """Home Assistant (or something in front of it) does not offer this over the WebSocket."""


def websocket_url(base_url: str) -> str:
    """`http(s)://host[:port][/path]` → `ws(s)://host[:port][/path]/api/websocket`."""
    if base_url.startswith("https://"):
        return "wss://" + base_url[len("https://"):] + "/api/websocket"
    if base_url.startswith("http://"):
        return "ws://" + base_url[len("http://"):] + "/api/websocket"
    raise ValueError("base_url must be http or https")


def command_failed(code: str) -> HABadResponse | HAUnauthorized:
    """The error for a command Home Assistant answered with `success: false` and this error code."""
    if code in UNSUPPORTED_ERRORS:
        return WebSocketUnsupported(f"Home Assistant does not answer this over its WebSocket ({code}).",
                                    reason="websocket_unsupported")
    if code == "unauthorized":
        return HAUnauthorized("Home Assistant refused the access token for this read.")
    return HABadResponse("Home Assistant could not answer the read.", reason="command_failed")


class HomeAssistantWebSocket:
    """An authenticated connection; sends only the ALLOWED_COMMANDS its maker declared, each with the next id."""

    def __init__(self, sock: socket.socket, connection: WSConnection, *, deadline: Deadline, max_bytes: int,
                 commands: frozenset[str] = ALLOWED_COMMANDS) -> None:
        self._sock = sock
        self._commands = commands
        self._ws = connection
        self._deadline = deadline
        self._max_bytes = max_bytes
        self._received = 0
        self._next_id = 1
        self._pending: deque[Any] = deque()

    def command(self, message: dict[str, Any]) -> Any:
        """Send one allowlisted command and return its result (the whole answer is parsed)."""
        return self.commands([message])[0]

    def commands(self, messages: list[dict[str, Any]]) -> list[Any]:
        """Send allowlisted commands one after another without waiting, and return their results in order.

        Home Assistant answers each when it is ready, in any order, so small reads cost one round trip
        together. Each answer is parsed whole: for small answers only (see `stream` for a large one).
        """
        ids = [self._send_command(message) for message in messages]
        results: dict[int, Any] = {}
        while len(results) < len(ids):
            answer = self._next_message()
            if not isinstance(answer, dict):
                raise _bad("a WebSocket message was not a JSON object")
            message_id = answer.get("id")
            if message_id not in ids or message_id in results or answer.get("type") != "result":
                continue  # an event, another id or a second answer: not one of these commands' answers
            if answer.get("success") is not True:
                error = answer.get("error")
                raise command_failed(str(error.get("code", "")) if isinstance(error, dict) else "")
            results[message_id] = answer.get("result")
        return [results[message_id] for message_id in ids]

    def stream(self, message: dict[str, Any]) -> tuple[int, Iterator[bytes]]:
        """Send one allowlisted command; its id, and the pieces of the next message as they come off the socket.

        The answer need never be held whole (see parse_events). The caller checks its envelope (id, type,
        success): nothing is subscribed to, so the next message is the answer.
        """
        message_id = self._send_command(message)
        return message_id, self._message_chunks()

    def first_event(self, message: dict[str, Any]) -> Any:
        """Subscribe with one allowlisted command, return its first event, and end the subscription.

        The event counts only after Home Assistant has accepted the subscription (`success`); events and
        answers of other ids are passed over. The unsubscribe is sent without waiting for its answer: the
        connection closes next, which would end the subscription anyway.
        """
        message_id = self._send_command(message)
        accepted = False
        while True:
            answer = self._next_message()
            if not isinstance(answer, dict):
                raise _bad("a WebSocket message was not a JSON object")
            if answer.get("id") != message_id:
                continue
            if answer.get("type") == "result" and not accepted:
                if answer.get("success") is not True:
                    error = answer.get("error")
                    raise command_failed(str(error.get("code", "")) if isinstance(error, dict) else "")
                accepted = True
            elif answer.get("type") == "event" and accepted:
                self._send_command({"type": UNSUBSCRIBE_COMMAND, "subscription": message_id})
                return answer.get("event")

    # --- the wire --------------------------------------------------------------------------------

    def _send_command(self, message: dict[str, Any]) -> int:
        if message.get("type") not in ALLOWED_COMMANDS & self._commands or "id" in message:
            raise ValueError(f"refusing to send {message.get('type')!r}: not an allowlisted read")
        message_id = self._next_id
        self._next_id += 1
        self._send_json({"id": message_id, **message})
        return message_id

    def _send_json(self, message: dict[str, Any]) -> None:
        self._send(self._ws.send(TextMessage(data=orjson.dumps(message).decode("utf-8"))))

    def _send(self, data: bytes) -> None:
        self._sock.settimeout(self._deadline.remaining())
        try:
            self._sock.sendall(data)
        except TimeoutError:
            raise self._deadline.error() from None
        except OSError:
            raise HAUnreachable("The connection to Home Assistant was lost.") from None

    def _receive(self) -> None:
        """Read what the socket has (waiting at most until the deadline) and hand it to the protocol."""
        self._sock.settimeout(self._deadline.remaining())
        try:
            data = self._sock.recv(READ_CHUNK_BYTES)
        except TimeoutError:
            raise self._deadline.error() from None
        except OSError:
            raise HABadResponse("Home Assistant stopped in the middle of its answer.", reason="incomplete") from None
        if not data:
            raise HABadResponse("Home Assistant closed the connection.", reason="incomplete")
        self._received += len(data)
        if self._received > self._max_bytes:
            raise HABadResponse(f"Home Assistant's answer was larger than the {self._max_bytes:,} bytes allowed "
                                "for it.", reason="too_large")
        try:
            self._ws.receive_data(data)
        except ProtocolError:
            raise _bad("Home Assistant broke the WebSocket protocol") from None

    def _next_event(self) -> Any:
        """The next protocol event, reading the socket while none is pending (kept across messages)."""
        while not self._pending:
            try:
                self._pending.extend(self._ws.events())
            except ProtocolError:
                raise _bad("Home Assistant broke the WebSocket protocol") from None
            if not self._pending:
                self._receive()
        return self._pending.popleft()

    def _message_chunks(self) -> Iterator[bytes]:
        """The pieces of the next data message, in order, as they arrive."""
        while True:
            event = self._next_event()
            if isinstance(event, TextMessage):
                yield event.data.encode("utf-8")
            elif isinstance(event, BytesMessage):
                yield bytes(event.data)
            elif isinstance(event, Ping):
                self._send(self._ws.send(event.response()))
                continue
            elif isinstance(event, CloseConnection):
                raise HABadResponse("Home Assistant closed the connection.", reason="incomplete")
            else:
                continue
            if event.message_finished:
                return

    def _next_message(self, limit: int | None = None) -> Any:
        """The next whole message, parsed (for the small messages of auth and the registry lists)."""
        limit = self._max_bytes if limit is None else limit
        body = bytearray()
        for chunk in self._message_chunks():
            body += chunk
            if len(body) > limit:
                raise HABadResponse(f"A message from Home Assistant was larger than the {limit:,} bytes allowed "
                                    "for it.", reason="too_large")
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _bad("a WebSocket message was not JSON") from None

    def close(self) -> None:
        """Say goodbye (without waiting for the answer) and close the socket."""
        try:
            # A goodbye is polite, not owed: never past the deadline.
            self._sock.settimeout(max(0.001, min(CLOSE_WAIT, self._deadline.left())))
            self._sock.sendall(self._ws.send(CloseConnection(code=1000)))
        except (OSError, ProtocolError):
            pass
        finally:
            self._sock.close()


@contextmanager
def connect(base_url: str, token: Secret, *, timeout: float, max_bytes: int, ca_bundle: str | None = None,
            commands: frozenset[str] = ALLOWED_COMMANDS) -> Iterator[HomeAssistantWebSocket]:
    """An authenticated WebSocket to the Home Assistant at `base_url`, sending only `commands`, closed on leaving.

    One deadline covers connecting, the handshake, authentication and every answer read through the
    connection. The token goes into the auth message and nowhere else, and only to `base_url`'s origin.
    Failures are HA* errors; WebSocketUnsupported when the server does not upgrade to a WebSocket.
    """
    if not isinstance(token, Secret):
        raise TypeError("token must be a Secret")
    deadline = Deadline(timeout, expired=lambda: _timeout_error(timeout))
    url = websocket_url(base_url)
    sock = _open_socket(base_url, deadline, ca_bundle)
    connection = HomeAssistantWebSocket(sock, WSConnection(ConnectionType.CLIENT), deadline=deadline,
                                        max_bytes=max_bytes, commands=commands)
    try:
        _handshake(connection, url)
        first = connection._next_message(AUTH_MESSAGE_BYTES)
        if not isinstance(first, dict) or first.get("type") != "auth_required":
            raise WebSocketUnsupported("Home Assistant's WebSocket did not ask for authentication.",
                                       reason="websocket_unsupported")
        # The token goes into this one message and nowhere else.
        connection._send_json({"type": "auth", "access_token": token.reveal()})
        answer = connection._next_message(AUTH_MESSAGE_BYTES)
        if not isinstance(answer, dict) or answer.get("type") != "auth_ok":
            raise HAUnauthorized("Home Assistant refused the access token. Create a new long-lived access "
                                 "token in your Home Assistant profile and save it here.")
        yield connection
    finally:
        connection.close()


def _handshake(connection: HomeAssistantWebSocket, url: str) -> None:
    """The HTTP upgrade; anything but 101 Switching Protocols means no WebSocket here."""
    parts = urlsplit(url)
    connection._send(connection._ws.send(Request(host=parts.netloc, target=parts.path)))
    while True:
        try:
            event = connection._next_event()
        except HABadResponse as err:
            if err.detail.get("reason") != "incomplete":
                raise
            # Closed on the upgrade (a proxy that does not carry WebSockets, say): no WebSocket here.
            raise WebSocketUnsupported("Home Assistant closed the connection instead of opening a WebSocket.",
                                       reason="websocket_unsupported") from None
        if isinstance(event, AcceptConnection):
            return
        if isinstance(event, (RejectConnection, RejectData)):
            raise WebSocketUnsupported("Home Assistant did not open a WebSocket.", reason="websocket_unsupported")


def _open_socket(base_url: str, deadline: Deadline, ca_bundle: str | None) -> socket.socket:
    """A connection straight to Home Assistant, TLS-verified for https, made before the deadline.

    Straight, never through a proxy from the environment, as the REST client (trust_env=False): the auth
    message carries the token. The name lookup is not bounded by socket timeouts, so the connect runs
    where the Deadline can give up on it.
    """
    failure: Exception | None = None
    try:
        return deadline.call(lambda: _direct_socket(base_url, deadline.seconds, ca_bundle), _close_quietly)
    except TimeoutError:
        failure = deadline.error()
    except ssl.SSLError:
        failure = HATLSError(
            "The secure connection to Home Assistant failed: its certificate is not trusted or does not "
            "match the address. Add your Home Assistant's CA certificate, or use its http:// address.",
            reason="certificate",
        )
    except (OSError, ValueError):
        failure = HAUnreachable("Home Assistant could not be reached. Check that it is running and that the "
                                "address is right.")
    raise failure


def _direct_socket(base_url: str, timeout: float, ca_bundle: str | None) -> socket.socket:
    parts = urlsplit(base_url)
    secure = parts.scheme == "https"
    host = parts.hostname or ""
    sock = socket.create_connection((host, parts.port or (443 if secure else 80)), timeout=timeout)
    if not secure:
        return sock
    try:
        context = ssl.create_default_context(cafile=ca_bundle or None)
        return context.wrap_socket(sock, server_hostname=host)
    except BaseException:
        sock.close()
        raise


def _close_quietly(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


def _timeout_error(timeout: float) -> HATimeout:
    seconds = max(1, round(timeout))
    return HATimeout(f"Home Assistant did not answer within {seconds} second{'s' if seconds != 1 else ''}.")


def _bad(what: str) -> HABadResponse:
    return HABadResponse(f"Home Assistant's WebSocket answer was not usable: {what}.", reason="wrong_shape")
